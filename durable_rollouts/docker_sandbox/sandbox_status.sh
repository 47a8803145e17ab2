#!/usr/bin/env bash
# Prints "none", "running", "exit <code>" or "lost" for a detached command: $1 = harness directory, $2 = name.
d=$1 n=$2
[ -f "$d/$n.pid" ] || { echo none; exit 0; }
[ -f "$d/$n.exit" ] && { echo "exit $(cat "$d/$n.exit")"; exit 0; }
kill -0 -- "-$(cat "$d/$n.pid")" 2>/dev/null && { echo running; exit 0; }
[ -f "$d/$n.exit" ] && { echo "exit $(cat "$d/$n.exit")"; exit 0; }
echo lost
