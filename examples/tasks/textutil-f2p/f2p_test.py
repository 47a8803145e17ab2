"""Fail-to-pass check for textutil-f2p: run from the repository root."""

import os
import sys

import pytest

sys.path.insert(0, os.getcwd())

from textutil import slugify  # noqa: E402


def test_collapses_runs_of_separators():
    assert slugify("Hello,  World!") == "hello-world"


def test_strips_leading_and_trailing_separators():
    assert slugify("  Crème brûlée ") == "creme-brulee"


def test_custom_separator():
    assert slugify("a  b", separator="_") == "a_b"


def test_plain_words_unchanged():
    assert slugify("hello world") == "hello-world"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
