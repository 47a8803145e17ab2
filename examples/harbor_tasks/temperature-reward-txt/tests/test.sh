#!/usr/bin/env bash
# Harbor verifier: runs the task's tests against /app and writes 1 or 0 to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
cd /app || exit 1
if PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider /tests/test_outputs.py; then
  echo 1 >/logs/verifier/reward.txt
else
  echo 0 >/logs/verifier/reward.txt
fi
