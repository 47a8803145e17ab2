"""What an entry script's argument parser says when it refuses a command line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def refusal(parse_args: Callable[[list[str]], Any], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``parse_args(argv)`` exits with argparse's usage error (2); what it wrote to stderr."""
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err
