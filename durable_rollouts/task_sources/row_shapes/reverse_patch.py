"""The reverse of a git-style unified diff: the patch that undoes it (SWE-smith's gold fix is its bug patch reversed).

Hunks are read by their line counts, so a removed line that itself begins
with ``--`` is never mistaken for a file header. Within each change block
the removals come first, as git writes them. A binary patch has no textual
reverse: ``reverse_patch`` returns None for it, and for text it cannot read.
"""

from __future__ import annotations

import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_DIFF = re.compile(r"^diff --git a/(.+) b/(.+)$")
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(.*)$")
# Extended header lines that name the old or the new side, each with its counterpart.
_SWAPPED = {
    "new file mode ": "deleted file mode ",
    "deleted file mode ": "new file mode ",
    "old mode ": "new mode ",
    "new mode ": "old mode ",
    "rename from ": "rename to ",
    "rename to ": "rename from ",
    "copy from ": "copy to ",
    "copy to ": "copy from ",
}


def _side(path: str, prefix: str) -> str:
    return path if path == "/dev/null" else prefix + path[2:] if path[:2] in ("a/", "b/") else path


def reverse_patch(patch: str) -> str | None:
    lines = patch.splitlines()
    out: list[str] = []
    header: list[str] = []
    old_path = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("GIT binary patch", "Binary files ")):
            return None
        if match := _DIFF.match(line):
            out += header
            header = [f"diff --git a/{match.group(2)} b/{match.group(1)}"]
        elif match := _INDEX.match(line):
            header.append(f"index {match.group(2)}..{match.group(1)}{match.group(3)}")
        elif swapped := next((new + line[len(old) :] for old, new in _SWAPPED.items() if line.startswith(old)), None):
            header.append(swapped)
        elif line.startswith("--- "):
            old_path = line[4:]
        elif line.startswith("+++ "):
            header += [f"--- {_side(line[4:], 'a/')}", f"+++ {_side(old_path, 'b/')}"]
        elif match := _HUNK.match(line):
            out += header
            header = []
            hunk, i = _reverse_hunk(lines, i, match)
            if hunk is None:
                return None
            out += hunk
            continue
        else:
            header.append(line)
        i += 1
    out += header
    return "\n".join(out) + "\n" if out else None


def _reverse_hunk(lines: list[str], start: int, match: re.Match[str]) -> tuple[list[str] | None, int]:
    """The reversed hunk starting at ``lines[start]`` and the index after it (None if its counts do not add up)."""
    old_start, old_count, new_start, new_count, context = match.groups()
    want_old, want_new = int(old_count or 1), int(new_count or 1)
    out = [
        f"@@ -{new_start}{'' if new_count is None else ',' + new_count} "
        f"+{old_start}{'' if old_count is None else ',' + old_count} @@{context}"
    ]
    removed: list[str] = []
    added: list[str] = []
    seen_old = seen_new = 0
    last = " "
    i = start + 1
    while i < len(lines) and (seen_old < want_old or seen_new < want_new or lines[i].startswith("\\")):
        line = lines[i]
        kind, body = line[:1], line[1:]
        if kind == "\\":
            (added if last == "+" else removed if last == "-" else out).append(line)
        elif kind == "-":
            added.append("+" + body)
            seen_old += 1
        elif kind == "+":
            removed.append("-" + body)
            seen_new += 1
        elif kind in (" ", ""):
            out += removed + added
            removed, added = [], []
            out.append(line if kind else " ")
            seen_old += 1
            seen_new += 1
        else:
            return None, i
        last = {"-": "+", "+": "-"}.get(kind, kind) if kind != "\\" else last
        i += 1
    if (seen_old, seen_new) != (want_old, want_new):
        return None, i
    return out + removed + added, i
