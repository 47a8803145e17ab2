"""How the entry scripts end their process once a Temporal client or worker has existed in it.

Invariant: ``leave`` never runs interpreter finalization. The Temporal core's Rust threads (a client's
connection, a failed connect's retry machinery) can still be alive then and crash it (SIGSEGV or SIGABRT,
temporalio/sdk-python#300), which would turn a clean exit 1 with its one-line message into a signal death.
Everything the caller opened must be closed before; logging is shut down and stdout/stderr are flushed here.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def leave(code: int, line: str | None = None) -> NoReturn:
    """Exit with ``code`` right away, after writing ``line`` (if any) to stderr (module invariant)."""
    if line is not None:
        print(line, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
