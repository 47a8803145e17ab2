#!/usr/bin/env bash
# Runs one detached command: $1 = harness directory, $2 = name.
# The command runs in its own process group (set -m), so kill_detached can
# signal the whole group while this runner survives to write the exit marker.
set -m
d=$1 n=$2
echo $$ >"$d/$n.runner"
bash -l "$d/$n.sh" >"$d/$n.out" 2>"$d/$n.err" </dev/null &
echo $! >"$d/$n.pid.tmp" && mv "$d/$n.pid.tmp" "$d/$n.pid"
wait $!
echo $? >"$d/$n.exit.tmp" && mv "$d/$n.exit.tmp" "$d/$n.exit"
