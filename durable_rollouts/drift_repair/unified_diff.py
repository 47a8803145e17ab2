"""Unified diffs of the single script an episode repairs: make, parse, render, apply.

Applying is done here, as text, not by ``git apply`` in a container: the
diff only ever edits ``script.py``, and the same code then serves the
workflow's grader and the offline corpus scorer. The result still runs in a
fresh sandbox.

Rules of ``apply_diff`` (documented scoring behaviour):

* an empty diff (no hunks) is the empty patch: the script is unchanged;
* every hunk must find its old lines (context and ``-`` lines) in the
  script, compared exactly up to trailing whitespace, at or after the end of
  the previous hunk; the match nearest the header's line number wins
  (``patch``-style offsets), there is no fuzz;
* a hunk body is read by its header's counts; a blank line inside a hunk is a
  blank context line (models drop the leading space); a header without counts
  reads until the first line that is not ``' '``, ``+``, ``-`` or ``\\``;
* all file headers must name one file (any name: it is the script);
* anything else raises ``DiffError``, which grades as "does not apply".
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from durable_rollouts.contracts.drift_repair import SCRIPT_NAME

HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
BARE_HUNK_HEADER = re.compile(r"^@@.*@@")
NO_EOL = "\\ No newline at end of file"


class DiffError(ValueError):
    pass


@dataclass
class Hunk:
    old_start: int
    new_start: int
    lines: list[str] = field(default_factory=list)
    old_missing_eol: bool = False
    new_missing_eol: bool = False

    @property
    def old_lines(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def new_lines(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " +"]


def make_diff(before: str, after: str, path: str = SCRIPT_NAME) -> str:
    """``diff -u`` from ``before`` to ``after`` with ``a/``/``b/`` headers; ``""`` when they are equal."""
    if before == after:
        return ""
    out = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    ):
        out.append(line if line.endswith("\n") else line + "\n" + NO_EOL + "\n")
    return "".join(out)


def _target(header: str) -> str:
    name = header[4:].split("\t")[0].strip()
    for prefix in ("a/", "b/", "./"):
        name = name.removeprefix(prefix)
    return name


def parse_diff(text: str) -> list[Hunk]:
    """The hunks of a one-file unified diff (see the module docstring); ``[]`` for an empty diff."""
    lines = text.splitlines()
    hunks: list[Hunk] = []
    targets: set[str] = set()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith(("--- ", "+++ ")):
            name = _target(line)
            if name and name != "/dev/null":
                targets.add(name)
            index += 1
        elif line.startswith("@@"):
            hunk, index = _read_hunk(lines, index)
            hunks.append(hunk)
        else:
            index += 1
    if len(targets) > 1:
        raise DiffError(f"the diff touches more than one file: {sorted(targets)}")
    return hunks


def _read_hunk(lines: list[str], index: int) -> tuple[Hunk, int]:
    header = lines[index]
    counted = HUNK_HEADER.match(header)
    if counted is None and not BARE_HUNK_HEADER.match(header):
        raise DiffError(f"malformed hunk header {header!r}")
    if counted:
        old_count = 1 if counted.group(2) is None else int(counted.group(2))
        new_count = 1 if counted.group(4) is None else int(counted.group(4))
        hunk = Hunk(int(counted.group(1)), int(counted.group(3)))
    else:
        old_count = new_count = -1
        hunk = Hunk(0, 0)
    index += 1
    seen_old = seen_new = 0
    while index < len(lines):
        line = lines[index]
        if counted and seen_old >= old_count and seen_new >= new_count:
            if line.startswith("\\"):
                _mark_missing_eol(hunk)
                index += 1
            break
        if line.startswith("\\"):
            _mark_missing_eol(hunk)
        elif line == "" and counted:
            hunk.lines.append(" ")
        elif line[:1] in (" ", "+", "-") and not (not counted and line.startswith(("--- ", "+++ "))):
            hunk.lines.append(line)
        else:
            break
        seen_old = len(hunk.old_lines)
        seen_new = len(hunk.new_lines)
        index += 1
    if not hunk.lines:
        raise DiffError(f"empty hunk at {header!r}")
    return hunk, index


def _mark_missing_eol(hunk: Hunk) -> None:
    kind = hunk.lines[-1][0] if hunk.lines else " "
    if kind in " -":
        hunk.old_missing_eol = True
    if kind in " +":
        hunk.new_missing_eol = True


def render_diff(hunks: list[Hunk], path: str = SCRIPT_NAME) -> str:
    """Canonical text for parsed hunks (counts recomputed), ``""`` for none."""
    if not hunks:
        return ""
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    for hunk in hunks:
        old, new = hunk.old_lines, hunk.new_lines
        out.append(f"@@ -{hunk.old_start},{len(old)} +{hunk.new_start},{len(new)} @@\n")
        last_old = max((i for i, line in enumerate(hunk.lines) if line[0] in " -"), default=-1)
        last_new = max((i for i, line in enumerate(hunk.lines) if line[0] in " +"), default=-1)
        for position, line in enumerate(hunk.lines):
            out.append(line + "\n")
            if (position == last_old and hunk.old_missing_eol) or (position == last_new and hunk.new_missing_eol):
                out.append(NO_EOL + "\n")
    return "".join(out)


def _find(source: list[str], old: list[str], expected: int, floor: int) -> int | None:
    wanted = [line.rstrip() for line in old]
    stripped = [line.rstrip() for line in source]
    fits = [p for p in range(floor, len(source) - len(old) + 1) if stripped[p : p + len(old)] == wanted]
    return min(fits, key=lambda p: (abs(p - expected), p), default=None)


def apply_diff(source: str, diff: str) -> str:
    """``source`` with ``diff`` applied (see the module docstring); ``DiffError`` if it does not apply."""
    hunks = parse_diff(diff)
    if not hunks:
        return source
    lines = source.splitlines()
    ends_with_newline = source.endswith("\n") or not source
    out: list[str] = []
    cursor = 0
    for number, hunk in enumerate(hunks, 1):
        old = hunk.old_lines
        expected = max(hunk.old_start - 1, 0) if old else hunk.old_start
        at = _find(lines, old, expected, cursor) if old else max(expected, cursor)
        if at is None or at > len(lines):
            raise DiffError(f"hunk {number} (@@ -{hunk.old_start} @@) does not match the script")
        out.extend(lines[cursor:at])
        out.extend(hunk.new_lines)
        cursor = at + len(old)
        if cursor == len(lines):
            ends_with_newline = not hunk.new_missing_eol and bool(out)
    out.extend(lines[cursor:])
    text = "\n".join(out)
    return text + "\n" if out and ends_with_newline else text
