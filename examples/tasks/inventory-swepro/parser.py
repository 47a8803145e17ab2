"""Usage: parser.py STDOUT STDERR RESULT_JSON.

Reads pytest ``-rA`` output and writes ``{"tests": [{"name", "status"}]}``
with status PASSED, FAILED, SKIPPED or ERROR, one entry per test id.
"""

import json
import re
import sys

_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S.*?)(?: - .*)?$")
_STATUS = {"XFAIL": "SKIPPED", "XPASS": "PASSED"}


def parse(text):
    tests = {}
    for line in text.splitlines():
        match = _SUMMARY.match(line.rstrip())
        if match and "::" in match.group(2):
            status, name = match.groups()
            tests[name] = _STATUS.get(status, status)
    return [{"name": name, "status": status} for name, status in tests.items()]


def main(stdout_path, stderr_path, result_path):
    with open(stdout_path, errors="replace") as stdout:
        tests = parse(stdout.read())
    with open(result_path, "w") as result:
        json.dump({"tests": tests}, result, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
