"""Objects loaded from a folder (a tokenizer, its token table), loaded once per process while the folder stays put.

Invariants:

* ``load_once(load, folder)`` returns the object an earlier call made with the same ``load`` and folder as long
  as no file directly in the folder has been added, removed, resized or rewritten since (name, size and
  modification time); otherwise it calls ``load(folder)`` again and keeps that instead;
* a folder that cannot be listed is loaded every time (the loader's own error names what is missing);
* loads run one at a time, so two callers asking for the same folder at once load it once; at most
  ``MAX_LOADED`` objects are kept, the least recently asked for leaving first;
* loaders return objects safe to share between threads and callers (read-only, or locked inside).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

MAX_LOADED = 8

T = TypeVar("T")
_Stamp = tuple[tuple[str, int, int], ...]

_loaded: OrderedDict[tuple[Callable[[Path], Any], Path], tuple[_Stamp, Any]] = OrderedDict()
_lock = threading.Lock()


def _stamp(folder: Path) -> _Stamp | None:
    try:
        with os.scandir(folder) as entries:
            files = [(entry.name, entry.stat()) for entry in entries if entry.is_file()]
    except OSError:
        return None
    return tuple(sorted((name, stat.st_size, stat.st_mtime_ns) for name, stat in files))


def load_once(load: Callable[[Path], T], folder: str | Path) -> T:
    path = Path(folder).resolve()
    stamp = _stamp(path)
    if stamp is None:
        return load(path)
    key = (load, path)
    with _lock:
        found = _loaded.get(key)
        if found is not None and found[0] == stamp:
            _loaded.move_to_end(key)
            return cast(T, found[1])
        value = load(path)
        _loaded[key] = (stamp, value)
        while len(_loaded) > MAX_LOADED:
            _loaded.popitem(last=False)
        return value
