#!/usr/bin/env bash
# Starts a detached command and waits for it, in one exec: $1 = the launch script's text
# (sandbox_launch.sh), $2 = the wait script's text (sandbox_wait.sh), then the launch script's
# arguments (harness directory, name, the runner's text[, the script's text]).
# A launch that fails exits with its own code plus 100 (105: already started); once launched, the
# wait's output and exit code.
launch=$1 wait=$2
shift 2
bash -c "$launch" launch "$@" || exit $((100 + $?))
exec bash -c "$wait" wait "$1" "$2"
