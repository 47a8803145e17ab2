#!/usr/bin/env bash
# check_against_slime.sh SLIME_DIR: run tests/against_slime against a checkout of THUDM/slime (624b824 or later).
# Builds (once, kept in .cache/slime-check/venv, rebuilt when slime's requirements or pyproject.toml change) a
# Python 3.12 venv with torch and slime's requirements.txt from the package index (large: a CUDA build of torch;
# nothing runs on a GPU) and this project with its worker and test extras, then runs the module with slime's code
# first on sys.path. Prints the slime commit it ran against.
set -euo pipefail
SLIME_DIR=$(cd "${1:?usage: check_against_slime.sh SLIME_DIR}" && pwd)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
[[ -f $SLIME_DIR/slime/agent/trajectory.py && -f $SLIME_DIR/requirements.txt ]] \
  || { echo "check_against_slime: $SLIME_DIR is not a slime checkout (no slime/agent/trajectory.py)" >&2; exit 1; }
VENV=.cache/slime-check/venv
# Keyed on what is installed (slime's requirements, this project's dependency tables), not on lint settings.
PROJECT_DEPS=$(python3 -c 'import json, tomllib; print(json.dumps(tomllib.load(open("pyproject.toml", "rb"))["project"], sort_keys=True))')
KEY=$(printf '%s\n%s' "$(cat "$SLIME_DIR/requirements.txt")" "$PROJECT_DEPS" | sha256sum | cut -c1-16)
if [[ ! -f $VENV/.installed || $(<"$VENV/.installed") != "$KEY" ]]; then
  PY=$(bash scripts/find_python.sh 3.12)
  echo "check_against_slime: building $VENV with $PY (torch, slime's requirements.txt, this project)"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
  # pybase64: slime's decode_int32_meta_array imports it (sglang brings it into slime's images).
  "$VENV/bin/pip" install -q torch pybase64 -r "$SLIME_DIR/requirements.txt" >.cache/slime-check/install.log 2>&1 \
    || { tail -n 30 .cache/slime-check/install.log >&2; exit 1; }
  "$VENV/bin/pip" install -q -e '.[worker,test]' >>.cache/slime-check/install.log 2>&1 \
    || { tail -n 30 .cache/slime-check/install.log >&2; exit 1; }
  echo "$KEY" >"$VENV/.installed"
fi
COMMIT=$(git -C "$SLIME_DIR" rev-parse --short HEAD 2>/dev/null || echo "unknown (not a git checkout)")
echo "check_against_slime: slime at $SLIME_DIR, commit $COMMIT"
# Importing torch makes its compile cache folder, by default /tmp/torchinductor_<user>: keep it beside the venv.
SLIME_DIR=$SLIME_DIR TORCHINDUCTOR_CACHE_DIR=$REPO/.cache/slime-check/torchinductor \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/against_slime "${@:2}"
