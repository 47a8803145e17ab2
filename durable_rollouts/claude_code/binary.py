"""Locate the Claude Code the sandboxes mount: host tarballs when configured, else the binary `make setup` installs.

Claude Code 2.1.x from npm is a self-contained native executable, shipped in
the platform package ``@anthropic-ai/claude-code-linux-<arch>``. The sandbox
bind-mounts it read-only into containers, so we return the resolved real file,
never a node wrapper script or a symlink. With ``SWE_HOST_CC_TARBALL`` (and
``SWE_HOST_NODE_TARBALL``) it is the install directory ``durable_rollouts.claude_code.tarballs``
unpacks instead.
"""

from __future__ import annotations

import os
import pathlib
import platform
import shutil

from durable_rollouts.claude_code.tarballs import install_from_tarballs
from durable_rollouts.paths import CACHE_DIR

CLAUDE_CODE_VERSION = "2.1.328"

_NPM_SCOPE = CACHE_DIR / "claude-code" / "node_modules" / "@anthropic-ai"
UNPACKED_TARBALLS_DIR = CACHE_DIR / "claude-code" / "unpacked"
_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


def find_claude_binary() -> pathlib.Path:
    """Return the real path of the Claude Code binary.

    Order: ``$CLAUDE_CODE_BINARY`` (an error if set but not executable); the npm install under ``.cache/claude-code``
    for this machine's architecture; ``claude`` on ``PATH``.
    """
    if env := os.environ.get("CLAUDE_CODE_BINARY"):
        path = pathlib.Path(env)
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
        raise FileNotFoundError(f"CLAUDE_CODE_BINARY={env} is not an executable file.")
    candidates: list[pathlib.Path] = []
    arch = _ARCH.get(platform.machine().lower())
    if arch:
        candidates.append(_NPM_SCOPE / f"claude-code-linux-{arch}" / "claude")
    if found := shutil.which("claude"):
        candidates.append(pathlib.Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
    tried = ", ".join(str(p) for p in candidates) or "nothing"
    raise FileNotFoundError(f"Claude Code {CLAUDE_CODE_VERSION} binary not found (tried {tried}); run `make setup`.")


def find_claude_code(cc_tarball: pathlib.Path | None = None, node_tarball: pathlib.Path | None = None) -> pathlib.Path:
    """What the sandboxes mount: the tarballs' install directory when ``cc_tarball`` is set, else
    ``find_claude_binary()``."""
    if cc_tarball is not None:
        return install_from_tarballs(cc_tarball, node_tarball, UNPACKED_TARBALLS_DIR)
    return find_claude_binary()
