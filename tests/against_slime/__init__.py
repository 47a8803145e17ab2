"""Checks of the drop-ins against slime's own code (a checkout named by ``SLIME_DIR``)."""

import os

import pytest

HOW = "needs a slime checkout: run scripts/check_against_slime.sh SLIME_DIR (a clone of THUDM/slime, 624b824 or later)"


def require_slime() -> None:
    """Skip the calling module unless ``SLIME_DIR`` names a checkout (the conftest puts it on ``sys.path``)."""
    if not os.environ.get("SLIME_DIR"):
        pytest.skip(HOW, allow_module_level=True)
