"""Harness scripts a dataset row names by path, read on the trainer side from inside the dataset root.

Invariants:

* A script path is resolved against the operator's dataset root (relative
  paths) or must already lie in it (absolute ones); a ``..`` component is
  refused outright, and so is a path that leaves the root once symlinks are
  resolved. Nothing outside the root is opened: a path outside it is refused
  on its text alone, one that leaves it through a symlink once resolved.
* Only a regular UTF-8 file of at most ``MAX_SCRIPT_BYTES`` is read; its text
  is inlined into the row's task, so no worker ever reads a host path a row
  names.
* A refusal is a ``ScriptRefused`` naming the row's field; it never carries
  any of the file's content.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

DATASET_ROOT_ENV = "ROLLOUT_DATASET_ROOT"
MAX_SCRIPT_BYTES = 1 << 20
# swepro key naming a script by path -> the key its text is inlined under.
SWEPRO_SCRIPT_PATHS = {"run_script_path": "run_script", "parser_script_path": "parser_script"}


class ScriptRefused(ValueError):
    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


def dataset_root(root: str | Path | None = None) -> Path | None:
    """The root script paths resolve in: ``root``, else ``$ROLLOUT_DATASET_ROOT``, else none (script paths are refused).

    There is no implicit root: a dataset saved in a home directory must not be able to inline the files beside it."""
    chosen = root or os.environ.get(DATASET_ROOT_ENV)
    return Path(os.path.realpath(chosen)) if chosen else None


def read_script(root: Path | None, value: Any, field: str) -> str:
    """The text of the script ``value`` names, from inside ``root`` (already a resolved path)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ScriptRefused(field, "must be a non-empty path")
    if root is None:
        raise ScriptRefused(
            field,
            f"a script path needs a dataset root: the operator sets --dataset-root or {DATASET_ROOT_ENV} (nothing "
            f"outside it is read)",
        )
    if ".." in PurePosixPath(value).parts:
        raise ScriptRefused(field, f"{value!r}: '..' is not allowed in a script path")
    candidate = Path(os.path.normpath(root / value))
    if not candidate.is_relative_to(root):
        raise ScriptRefused(field, f"{value!r} is outside the dataset root {root}")
    real = Path(os.path.realpath(candidate))
    if not real.is_relative_to(root):
        raise ScriptRefused(field, f"{value!r} leaves the dataset root {root} through a symlink")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise ScriptRefused(field, f"{value!r} cannot be opened in the dataset root ({error.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ScriptRefused(field, f"{value!r} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_SCRIPT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptRefused(field, f"{value!r} is larger than {MAX_SCRIPT_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScriptRefused(field, f"{value!r} is not UTF-8 text") from None


def inline_swepro_scripts(swepro: Any, root: Path | None, field: str = "metadata.swepro") -> Any:
    """``swepro`` with each ``*_script_path`` replaced by the script's text; anything but a dict is returned as is."""
    if not isinstance(swepro, dict) or not any(swepro.get(key) for key in SWEPRO_SCRIPT_PATHS):
        return swepro
    inlined = dict(swepro)
    for path_key, text_key in SWEPRO_SCRIPT_PATHS.items():
        value = inlined.pop(path_key, None)
        if not value:
            continue
        if inlined.get(text_key):
            raise ScriptRefused(f"{field}.{path_key}", f"give {text_key} or {path_key}, not both")
        inlined[text_key] = read_script(root, value, f"{field}.{path_key}")
    return inlined
