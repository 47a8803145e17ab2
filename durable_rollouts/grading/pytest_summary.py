"""pytest's closing summary line (``=== 3 passed, 1 failed in 0.12s ===``): group 1 is its counts.

Read by the graders (test counts of a run) and by the trainer's grading summary (``starter.py show``), which
must not need a worker's packages to do it."""

from __future__ import annotations

import re

PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b")
