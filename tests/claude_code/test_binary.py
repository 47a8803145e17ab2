"""The Claude Code binary that `make setup` installs is found and is the pinned version."""

import os
import subprocess

from durable_rollouts.claude_code.binary import CLAUDE_CODE_VERSION, find_claude_binary


def test_binary_found_and_version_matches():
    binary = find_claude_binary()
    assert binary.is_absolute() and not binary.is_symlink()
    assert os.access(binary, os.X_OK)
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split()[0] == CLAUDE_CODE_VERSION, out
