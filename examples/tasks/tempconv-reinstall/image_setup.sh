#!/usr/bin/env bash
set -euo pipefail
# Install the package editable into /opt/venv from the wheelhouse, as an image with its package installed
# (SWE-bench's) has it; the build's leftovers are ignored by the repo's .gitignore.
/opt/venv/bin/python -m pip install -q --no-index --find-links /opt/wheels -e .
