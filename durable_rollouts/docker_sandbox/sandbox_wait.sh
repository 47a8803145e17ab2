#!/usr/bin/env bash
# Prints a detached command's exit code once it ends: $1 = harness directory, $2 = name.
# Exit 3: never started; 4: the runner died without an exit marker.
d=$1 n=$2
[ -f "$d/$n.pid" ] || exit 3
while [ ! -f "$d/$n.exit" ]; do
  kill -0 "$(cat "$d/$n.runner")" 2>/dev/null || { [ -f "$d/$n.exit" ] || exit 4; }
  sleep 0.2
done
cat "$d/$n.exit"
