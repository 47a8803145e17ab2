#!/bin/bash
# Usage: run_script.sh <comma-separated test files>. Runs them with a
# per-test summary (-rA) on stdout; the parser turns that into result.json.
set -uo pipefail
IFS=',' read -r -a test_files <<< "${1:-}"
python3 -m pytest -rA -p no:cacheprovider --color=no "${test_files[@]}"
