"""Claude Code from host tarballs (the reference's ``SWE_HOST_CC_TARBALL`` and ``SWE_HOST_NODE_TARBALL``),
unpacked once per host into a directory the sandbox bind-mounts read-only.

Invariants:

* the result is a world-readable directory whose ``bin/claude`` runs Claude
  Code, on the host and at any mount point (the launcher finds its siblings
  relative to itself), for any user; containers mount it, nothing is copied
  per sample;
* unpacking is keyed by the tarballs' content hashes and atomic (a temporary
  directory renamed into place), so restarts and concurrent workers reuse one
  copy and never see half of one;
* Claude Code tarball shapes (``npm pack`` output): a native platform package
  (``package/claude``, Claude Code >= 2.1) needs no Node; a JavaScript CLI
  (``package/cli.js``, Claude Code <= 2.0) needs the Node tarball (an official
  ``node-v*-linux-*.tar.xz`` or an npm ``node-linux-*`` package: whatever
  holds ``bin/node``);
* every problem is a ``ClaudeTarballError`` naming the variable and file.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
from pathlib import Path

from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

CC_VARIABLE = "SWE_HOST_CC_TARBALL"
NODE_VARIABLE = "SWE_HOST_NODE_TARBALL"

JS_LAUNCHER = ShellScript("durable_rollouts.claude_code", "tarballs_launcher.sh")


class ClaudeTarballError(ValueError):
    pass


def install_from_tarballs(cc_tarball: Path, node_tarball: Path | None, cache_dir: Path) -> Path:
    """The install directory for these tarballs, unpacking them on first use."""
    cc_digest = _digest(cc_tarball, CC_VARIABLE)
    node_digest = _digest(node_tarball, NODE_VARIABLE) if node_tarball else "none"
    target = cache_dir / f"{cc_digest}-{node_digest}"
    if (target / "bin" / "claude").is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=cache_dir))
    staging.chmod(0o755)
    try:
        _unpack_into(staging, cc_tarball, node_tarball)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "bin" / "claude").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _unpack_into(root: Path, cc_tarball: Path, node_tarball: Path | None) -> None:
    cli = root / "cli"
    _extract(cc_tarball, cli, CC_VARIABLE)
    package = cli / "package"
    (root / "bin").mkdir()
    if (package / "claude").is_file():
        (root / "bin" / "claude").symlink_to(Path("..") / "cli" / "package" / "claude")
        (package / "claude").chmod(0o755)
        return
    if not (package / "cli.js").is_file():
        raise ClaudeTarballError(
            f"{CC_VARIABLE}={cc_tarball}: neither package/claude (native) nor package/cli.js (JavaScript) inside"
        )
    if node_tarball is None:
        raise ClaudeTarballError(
            f"{CC_VARIABLE}={cc_tarball} is the JavaScript CLI: set {NODE_VARIABLE} to a Node.js tarball too"
        )
    for item in package.iterdir():
        item.rename(cli / item.name)
    package.rmdir()
    unpacked_node = root / "node-unpacked"
    _extract(node_tarball, unpacked_node, NODE_VARIABLE)
    node_bin = next(iter(sorted(unpacked_node.glob("*/bin/node"))), None)
    if node_bin is None:
        raise ClaudeTarballError(f"{NODE_VARIABLE}={node_tarball}: no bin/node one directory down")
    node_bin.parent.parent.rename(root / "node")
    shutil.rmtree(unpacked_node)
    launcher = root / "bin" / "claude"
    launcher.write_text(JS_LAUNCHER.text)
    launcher.chmod(0o755)


def _extract(tarball: Path, into: Path, variable: str) -> None:
    try:
        with tarfile.open(tarball) as archive:
            archive.extractall(into, filter="tar")
    except (OSError, tarfile.TarError) as error:
        raise ClaudeTarballError(f"{variable}={tarball}: cannot unpack ({error})") from None


def _digest(path: Path, variable: str) -> str:
    sha = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                sha.update(chunk)
    except OSError as error:
        raise ClaudeTarballError(f"{variable}={path}: {error.strerror or error}") from None
    return sha.hexdigest()[:16]
