#!/usr/bin/env bash
# TERMs a detached command's process group, KILLs it after 5 s: $1 = harness directory, $2 = name.
d=$1 n=$2
[ -f "$d/$n.pid" ] || exit 0
pg=$(cat "$d/$n.pid")
kill -TERM -- "-$pg" 2>/dev/null || exit 0
for _ in $(seq 50); do kill -0 -- "-$pg" 2>/dev/null || exit 0; sleep 0.1; done
kill -KILL -- "-$pg" 2>/dev/null; exit 0
