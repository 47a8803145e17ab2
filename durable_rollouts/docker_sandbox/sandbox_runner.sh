#!/usr/bin/env bash
# Runs one detached command: $1 = harness directory, $2 = name.
# The command runs in its own process group (set -m), so kill_detached can
# signal the whole group while this runner survives to write the exit marker.
# Once the marker is in place, a line on the FIFO <name>.done wakes a waiter
# (sandbox_wait.sh); it is opened read-write, so the write never blocks.
set -m
d=$1 n=$2
echo $$ >"$d/$n.runner"
mkfifo "$d/$n.done" 2>/dev/null
bash -l "$d/$n.sh" >"$d/$n.out" 2>"$d/$n.err" </dev/null &
echo $! >"$d/$n.pid.tmp" && mv "$d/$n.pid.tmp" "$d/$n.pid"
wait $!
echo $? >"$d/$n.exit.tmp" && mv "$d/$n.exit.tmp" "$d/$n.exit"
if [ -p "$d/$n.done" ]; then echo ended 1<>"$d/$n.done"; fi
