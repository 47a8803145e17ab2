"""Puts the slime checkout named by ``SLIME_DIR`` first on ``sys.path`` (``scripts/check_against_slime.sh`` sets it)."""

from __future__ import annotations

import os
import sys


def pytest_configure(config):
    checkout = os.environ.get("SLIME_DIR")
    if checkout and checkout not in sys.path:
        sys.path.insert(0, checkout)
