"""Bash scripts shipped as package data beside the modules that run them (``<package>/*.sh``, linted by shellcheck).

A script takes every value as a positional parameter, never by interpolation: run through
``bash -c <script> <name> <args>``, or, where the caller runs plain script text (``bash -lc``,
a detached command), as ``invocation`` text that sets the parameters first.
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass
from importlib import resources


@functools.cache
def _read(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class ShellScript:
    """The script ``name`` shipped in ``package`` (e.g. ``ShellScript("durable_rollouts.docker_sandbox",
    "sandbox_wait.sh")``)."""

    package: str
    name: str

    @property
    def text(self) -> str:
        return _read(self.package, self.name)

    def invocation(self, *args: str) -> str:
        """Script text that runs this script with ``args`` as its positional parameters (quoted, never interpolated)."""
        return f"set -- {shlex.join(args)}\n{self.text}"
