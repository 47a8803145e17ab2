#!/usr/bin/env bash
# Runs the Python environment probe ($2) with every Python interpreter of the sandbox, once each:
# the one on PATH and those in the usual environment roots (conda envs, /opt/venv). $1 = the workdir.
# Each interpreter prints one JSON line (an interpreter reached by two paths prints the same line, which
# the caller folds); one that fails prints nothing. No Python: no output.
workdir=$1 probe=$2
declare -A seen
for python in "$(command -v python3)" "$(command -v python)" /opt/venv/bin/python /usr/local/bin/python3 /usr/bin/python3 \
  /opt/miniconda3/envs/*/bin/python /opt/conda/envs/*/bin/python /root/miniconda3/envs/*/bin/python; do
  [[ -n $python && -x $python ]] || continue
  [[ -n ${seen[$python]:-} ]] && continue
  seen[$python]=1
  (cd "$workdir" && "$python" "$probe" "$workdir" 2>/dev/null)
done
exit 0
