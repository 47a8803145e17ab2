"""Argument types for the entry scripts' flags: a value out of range is refused by argparse, which names the flag.

Invariants: every number is finite (``nan`` and ``inf`` are refused); a path argument names something that exists
when the command starts, so a mistyped dataset or folder fails before any server is contacted.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path


def count_arg(least: int, most: int | None = None) -> Callable[[str], int]:
    """An integer flag's type: at least ``least`` (and at most ``most``)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
        if number < least:
            raise argparse.ArgumentTypeError(f"{number} is less than {least}")
        if most is not None and number > most:
            raise argparse.ArgumentTypeError(f"{number} is more than {most}")
        return number

    return parse


def number_arg(least: float, *, above: bool = False) -> Callable[[str], float]:
    """A number flag's type: finite and at least ``least`` (more than it with ``above``)."""

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"{value!r} is not a finite number")
        if number < least or (above and number == least):
            raise argparse.ArgumentTypeError(f"{number:g} is not {'more than' if above else 'at least'} {least:g}")
        return number

    return parse


def share_arg(value: str) -> float:
    """A share flag's type: a number from 0 to 1."""
    share = number_arg(0.0)(value)
    if share > 1:
        raise argparse.ArgumentTypeError(f"{share:g} is not between 0 and 1")
    return share


def existing_path_arg(value: str) -> str:
    """A file or folder that exists (a dataset, Harbor tasks, a tokenizer folder)."""
    if not Path(value).exists():
        raise argparse.ArgumentTypeError(f"{value!r}: no such file or folder")
    return value


port_arg = count_arg(0, 65535)
