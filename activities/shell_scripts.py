"""The bash scripts shipped as package data beside these modules (``activities/*.sh``, linted by shellcheck).

A script takes every value as a positional parameter, never by interpolation: run through
``bash -c <script> <name> <args>``, or, where the caller runs plain script text (``bash -lc``,
a detached command), as ``invocation`` text that sets the parameters first.
"""

from __future__ import annotations

import functools
import shlex
from importlib import resources


@functools.cache
def load(name: str) -> str:
    """The text of the packaged script ``name`` (e.g. ``"sandbox_wait.sh"``)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def invocation(name: str, *args: str) -> str:
    """Script text that runs ``name`` with ``args`` as its positional parameters (quoted, never interpolated)."""
    return f"set -- {shlex.join(args)}\n{load(name)}"
