#!/usr/bin/env bash
# Moves a staged detached command into place and starts its runner: $1 = harness directory, $2 = name.
# Exit 5: already started (its staged files are discarded, the running ones untouched).
d=$1 n=$2
if [ -f "$d/$n.pid" ]; then rm -f "$d/$n.sh.new" "$d/$n.run.new"; echo "already started" >&2; exit 5; fi
mv -f "$d/$n.sh.new" "$d/$n.sh" && mv -f "$d/$n.run.new" "$d/$n.run"
bash "$d/$n.run" "$d" "$n" </dev/null >/dev/null 2>&1 &
for _ in $(seq 400); do [ -f "$d/$n.pid" ] && exit 0; sleep 0.025; done
echo "detached command $n did not record its pid" >&2; exit 1
