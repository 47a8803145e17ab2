"""How often the patch screen (``durable_rollouts/grading/patch_screen.py``) hits honest fixes:
``python -m scripts.screen_gold_patches <datasets checkout or bare mirror>``.

Screens the gold ``patch`` of every ``datasets/swebench-verified/*/tests/config.json`` of a checkout (or a bare
git mirror, read through ``git ls-tree``/``cat-file``) of rese1f/terminal-bench-datasets, then the example tasks'
reference patches, and prints rows screened, rows hit, the rate, hits per rule and each hit row's evidence.
Reads local paths only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from durable_rollouts.grading.patch_screen import SCREEN_RULES, rule_names, screen
from durable_rollouts.paths import PROJECT_ROOT

ROWS = "datasets/swebench-verified"


def _bare_rows(git_dir: Path) -> Iterator[tuple[str, str]]:
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", "HEAD", ROWS],
        capture_output=True,
        text=True,
        check=True,
    )
    paths = sorted(path for path in listing.stdout.splitlines() if path.endswith("/tests/config.json"))
    blobs = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
        input="".join(f"HEAD:{path}\n" for path in paths).encode(),
        capture_output=True,
        check=True,
    ).stdout
    offset = 0
    for path in paths:
        header_end = blobs.index(b"\n", offset)
        size = int(blobs[offset:header_end].split()[2])
        yield path.split("/")[2], blobs[header_end + 1 : header_end + 1 + size].decode()
        offset = header_end + 1 + size + 1


def gold_rows(source: Path) -> Iterator[tuple[str, str]]:
    """Each row's instance id and gold ``patch``, from a checkout or a bare mirror."""
    if (source / "objects").is_dir() and (source / "HEAD").is_file():
        configs = _bare_rows(source)
    else:
        configs = (
            (path.parents[1].name, path.read_text()) for path in sorted((source / ROWS).glob("*/tests/config.json"))
        )
    for instance_id, text in configs:
        yield instance_id, json.loads(text)["patch"]


def example_patches() -> Iterator[tuple[str, str]]:
    """The example tasks' reference patches, by their path in the repository."""
    paths = [
        *(PROJECT_ROOT / "examples" / "tasks").glob("*/reference.patch"),
        *(PROJECT_ROOT / "examples" / "harbor_tasks").glob("*/solution/reference.patch"),
    ]
    for path in sorted(paths):
        yield str(path.relative_to(PROJECT_ROOT)), path.read_text()


def report(title: str, patches: Iterator[tuple[str, str]]) -> None:
    """Print the screen's tally over ``patches`` and each hit's evidence."""
    screened, hit_rows, hits, rows_by_rule = 0, {}, Counter[str](), Counter[str]()
    for name, patch in patches:
        screened += 1
        evidence = screen(patch)
        if evidence:
            hit_rows[name] = evidence
            counts = rule_names(evidence)
            hits.update(counts)
            rows_by_rule.update(counts.keys())
    rate = len(hit_rows) / screened if screened else 0.0
    print(
        f"== {title}\nrows screened: {screened}\nrows with any hit: {len(hit_rows)}\nrate: {rate:.2%}\nhits per rule "
        f"(hits, rows):"
    )
    for rule in SCREEN_RULES:
        print(f"  {rule.name}: {hits[rule.name]} hits in {rows_by_rule[rule.name]} rows")
    for name, evidence in hit_rows.items():
        print(f"{name}: {', '.join(sorted(rule_names(evidence)))}")
        for line in evidence:
            print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "source", type=Path, help="a checkout of rese1f/terminal-bench-datasets, or its bare git mirror"
    )
    args = parser.parse_args()
    report(f"SWE-bench Verified gold patches ({args.source})", gold_rows(args.source))
    print()
    report("example tasks' reference patches", example_patches())


if __name__ == "__main__":
    main()
