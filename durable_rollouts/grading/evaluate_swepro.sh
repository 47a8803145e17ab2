#!/usr/bin/env bash
# The swepro grader: $1 = the directory holding run_script.sh and parser.py; environment:
# SWEPRO_TEST_FILES. The run script's exit code is ignored: the parser's result.json decides.
dir=$1
bash "$dir/run_script.sh" "$SWEPRO_TEST_FILES" \
  >"$dir/stdout.log" 2>"$dir/stderr.log"
python3 "$dir/parser.py" "$dir/stdout.log" "$dir/stderr.log" "$dir/result.json"
