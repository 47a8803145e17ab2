"""Run inside a SWE-smith grading sandbox (standard library only): read the test log, decide, exit 0 iff solved.

Usage: ``python3 swe_smith_verdict.py LOG REQUIRED``. The JSON file ``REQUIRED``
holds ``FAIL_TO_PASS``, ``PASS_TO_PASS`` and ``files``, the test files that
ran. Statuses come from pytest's verbose lines (``path::name PASSED``) and
its ``-rA`` summary lines (``PASSED path::name``), between the harness's
start and end markers. A required test counts when its file ran (as
SWE-smith's harness filters them); it passes iff the log reports it
``PASSED`` or ``XFAIL``: a test the log does not report has not passed.
"""

from __future__ import annotations

import json
import re
import sys

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
STATUSES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL")
PASSING = ("PASSED", "XFAIL")
_STATUS = "|".join(STATUSES)
_VERBOSE = re.compile(rf"^(\S+)\s+({_STATUS})\b")
_SUMMARY = re.compile(rf"^({_STATUS})\s+(\S+)")


def test_output(log: str) -> str:
    start, end = log.find(START), log.rfind(END)
    return log[start + len(START) : end] if 0 <= start < end else ""


def statuses(output: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in output.splitlines():
        line = line.strip()
        if match := _VERBOSE.match(line):
            found[match.group(1)] = match.group(2)
        elif match := _SUMMARY.match(line):
            found[match.group(2)] = match.group(1)
    return found


def main(log_path: str, required_path: str) -> int:
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        output = test_output(handle.read())
    with open(required_path, encoding="utf-8") as handle:
        required = json.load(handle)
    if not output:
        print("[swe-smith verdict: the test output markers are missing: the tests did not run]")
        return 1
    found = statuses(output)
    files = set(required["files"])
    tests = [t for t in required["FAIL_TO_PASS"] + required["PASS_TO_PASS"] if t.split("::", 1)[0] in files]
    failed = [t for t in tests if found.get(t) not in PASSING]
    print(f"[swe-smith verdict: {len(tests) - len(failed)} of {len(tests)} required tests passed]")
    for name in failed[:20]:
        print(f"[not passed: {name} ({found.get(name, 'not reported')})]")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
