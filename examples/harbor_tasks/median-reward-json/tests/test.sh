#!/usr/bin/env bash
# Harbor verifier: runs each check against /app and writes /logs/verifier/reward.json:
# reward 1 when every check passes (else 0) and the counts as further metrics.
mkdir -p /logs/verifier
cd /app || exit 1
passed=0 total=0
for check in odd even unsorted mean; do
  total=$((total + 1))
  if python3 /tests/checks.py "$check"; then passed=$((passed + 1)); fi
done
reward=0
if [ "$passed" -eq "$total" ]; then reward=1; fi
printf '{"reward": %s, "checks_passed": %s, "checks_total": %s}\n' "$reward" "$passed" "$total" >/logs/verifier/reward.json
cat /logs/verifier/reward.json
