#!/usr/bin/env bash
# Prints a detached command's exit code once it ends: $1 = harness directory, $2 = name.
# Exit 3: never started; 4: the runner died without an exit marker.
# The wait forks nothing while it waits: it blocks on the runner's FIFO (held
# open from before the first check, so no wake-up is lost) for at most 1 s a
# round, and checks the marker and the runner with builtins. Without the FIFO
# (a runner that could not make one) it polls every 0.2 s.
d=$1 n=$2
[ -f "$d/$n.pid" ] || exit 3
read -r runner <"$d/$n.runner"
fifo=0
if [ -p "$d/$n.done" ]; then exec 3<>"$d/$n.done" && fifo=1; fi
while [ ! -f "$d/$n.exit" ]; do
  kill -0 "$runner" 2>/dev/null || { [ -f "$d/$n.exit" ] || exit 4; }
  if [ $fifo = 1 ]; then read -r -t 1 -u 3 _; else sleep 0.2; fi
done
read -r code <"$d/$n.exit"
echo "$code"
