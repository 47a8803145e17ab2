"""The paths a diff names, and the ones no rung of the apply ladder may write: ``.git`` is never the patch's.

Invariants:

* ``header_paths`` reads every path a unified or git diff names in its file headers (``diff --git``, ``---`` /
  ``+++``, ``rename`` / ``copy`` from and to, ``Index:``), unquoted (git's C-style quoting) and without the ``a/`` /
  ``b/`` prefix; it never raises, whatever the text.
* ``refused`` names what makes a diff unappliable in grading: a path with a ``.git`` component in any case (git
  refuses it, ``patch --fuzz`` did not: a repository config is root code at the next git command), an absolute path
  or one that climbs out with ``..``, and a new symlink whose target, from the link's folder, is absolute, climbs
  out or enters ``.git``.
  ``git diff`` never writes any of them for an honest change.
"""

from __future__ import annotations

import codecs
import posixpath
import re
from collections.abc import Iterator
from pathlib import PurePosixPath

_HEADERS = ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ", "Index: ")
_GIT_HEADER = re.compile(r'^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)\s*$')
_SYMLINK_MODE = re.compile(r"^new (?:file )?mode 120000\s*$")
MAX_NAMED = 10


def unquote_path(path: str) -> str:
    """A path as git wrote it in a header, without its C-style quoting (``"a/caf\\303\\251"``), its tab-separated
    timestamp and its ``a/``/``b/`` prefix."""
    path = path.split("\t", 1)[0].strip()
    if len(path) > 1 and path[0] == path[-1] == '"':
        try:
            path = codecs.escape_decode(path[1:-1].encode("utf-8", "surrogateescape"))[0].decode("utf-8", "replace")
        except Exception:  # a malformed escape: the text as written
            path = path[1:-1]
    return path[2:] if path[:2] in ("a/", "b/") else path


def _git_header_names(line: str) -> list[str]:
    match = _GIT_HEADER.match(line)
    return [unquote_path(name) for name in (match.groups() if match else line[len("diff --git ") :].split())]


def header_paths(diff: str) -> Iterator[str]:
    """Every path the diff's file headers name (see the module docstring); ``/dev/null`` left out."""
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            yield from _git_header_names(line)
        elif line.startswith(_HEADERS):
            path = unquote_path(
                line.split(" ", 2)[-1] if line.startswith(("rename ", "copy ")) else line.split(" ", 1)[1]
            )
            if path != "/dev/null":
                yield path


def _outside_or_git(path: str) -> str:
    """Why ``path`` (workdir-relative, as a header or a symlink names it) is out of a patch's reach, or ""."""
    parts = PurePosixPath(path).parts
    if path.startswith("/"):
        return "an absolute path"
    if ".." in parts:
        return "a path that climbs out of the workdir"
    if any(part.casefold() == ".git" for part in parts):
        return "a path under .git"
    return ""


def _symlink_targets(diff: str) -> Iterator[str]:
    """Where the symlinks the diff creates point, as workdir-relative paths (the one added line of a mode 120000
    file, resolved from the link's folder; an absolute target as it is)."""
    lines = diff.splitlines()
    link = ""
    for index, line in enumerate(lines):
        if line.startswith("diff --git "):
            names = _git_header_names(line)
            link = names[-1] if names else ""
        elif _SYMLINK_MODE.match(line):
            added = (
                later[1:]
                for later in lines[index + 1 : index + 12]
                if later.startswith("+") and not later.startswith("+++")
            )
            target = next(added, None)
            if target is not None:
                yield (
                    target
                    if target.startswith("/")
                    else posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
                )


def refused(diff: str) -> list[str]:
    """Why the diff may not be applied in grading, one line per path (at most ``MAX_NAMED``); empty when it may."""
    found = [f"{why}: {path!r}" for path in dict.fromkeys(header_paths(diff)) if (why := _outside_or_git(path))]
    found += [
        f"a symlink to {why}: {target!r}" for target in _symlink_targets(diff) if (why := _outside_or_git(target))
    ]
    return found[:MAX_NAMED]
