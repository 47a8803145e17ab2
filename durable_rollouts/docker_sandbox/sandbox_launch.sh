#!/usr/bin/env bash
# Puts a detached command's script and runner in place and starts the runner:
# $1 = harness directory, $2 = name, $3 = the runner's text, $4 = the script's text
# (without $4, the script was staged as <name>.sh.new beforehand).
# Exit 5: already started (a staged script is discarded, the running one's files untouched).
d=$1 n=$2
if [ -f "$d/$n.pid" ]; then rm -f "$d/$n.sh.new"; echo "already started" >&2; exit 5; fi
if [ $# -ge 4 ]; then printf '%s' "$4" >"$d/$n.sh.new" || exit 1; fi
printf '%s' "$3" >"$d/$n.run.new" && chmod 755 "$d/$n.sh.new" "$d/$n.run.new" || exit 1
mv -f "$d/$n.sh.new" "$d/$n.sh" && mv -f "$d/$n.run.new" "$d/$n.run"
# Job control: the runner gets a process group of its own, out of the exec's (the exec's `timeout`
# signals its whole group when it expires, which would take the runner with it); disowned, so this
# shell never reports it done.
set -m
bash "$d/$n.run" "$d" "$n" </dev/null >/dev/null 2>&1 &
disown
set +m
for _ in $(seq 400); do [ -f "$d/$n.pid" ] && exit 0; sleep 0.025; done
echo "detached command $n did not record its pid" >&2; exit 1
