#!/usr/bin/env bash
# find_python.sh X.Y: print the path of a Python X.Y interpreter (python X.Y on PATH, else a pyenv
# install of it), or say which one is missing and exit 1.
set -euo pipefail
want=${1:?usage: find_python.sh X.Y}
works() { "$1" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$want'.split('.')))" 2>/dev/null; }
for candidate in "$(command -v "python$want" || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want".*/bin/"python$want"; do
  if [[ -n $candidate && -x $candidate ]] && works "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done
echo "find_python.sh: no Python $want found (looked for python$want on PATH and under ${PYENV_ROOT:-$HOME/.pyenv}/versions)" >&2
exit 1
