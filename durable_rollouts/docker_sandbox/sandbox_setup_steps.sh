#!/usr/bin/env bash
# Runs a sandbox's set-up steps, then records the workspace baseline, then runs a last shell text (the
# agent's files written: ``files.files_step``; "" for none), in one exec as the workdir's user:
# $1 = seconds a step may take, $2 = how many steps, $3 = the last text, then the steps' texts, then the
# snapshot script's text and its arguments.
# Each step runs in the workdir as `bash -lc` under `set -e` and `timeout` (a login shell of its
# own, as a separate exec of it would). The first failing step stops the rest and says why on the
# last line ("step <i> exit <code>" or "step <i> timed out"), exit 86. A failing last text exits 87.
t=$1 count=$2 last=$3
shift 3
for ((i = 0; i < count; i++)); do
  started=$SECONDS
  timeout -k 5 "$t" bash -lc "set -e
$1"
  code=$?
  if [ "$code" -ne 0 ]; then
    if { [ "$code" = 124 ] || [ "$code" = 137 ]; } && [ $((SECONDS - started)) -ge "${t%.*}" ]; then
      echo "step $i timed out"
    else
      echo "step $i exit $code"
    fi
    exit 86
  fi
  shift
done
snapshot=$1
shift
bash -c "$snapshot" git_workspace_snapshot.sh "$@" || exit
if [ -n "$last" ]; then
  (eval "$last") || exit 87
fi
