"""A CPU thread pool shared by many sessions that no session can monopolise.

``await pool.run(key, fn, *args)`` runs ``fn(*args)`` on one of the pool's threads; ``key`` names who asked (the
adapter uses the session id). All bookkeeping happens on the event loop's thread.

Invariants:

* at most ``threads`` calls run at once, and at most **one per key**: a key with many calls waiting still holds
  a single thread, so with ``threads >= 2`` one key can never hold the whole pool;
* keys are served round robin, FIFO within a key: once a key is waiting, at most one call of every other key
  starts before its next call does, however many calls any key has queued;
* a call whose caller is cancelled while it waits never runs; one cancelled while it runs keeps its thread until
  ``fn`` returns (threads cannot be interrupted), and its result is dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class _Call:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    done: asyncio.Future


class FairExecutor:
    def __init__(self, threads: int, thread_name_prefix: str = "fair-cpu"):
        if threads < 1:
            raise ValueError(f"threads: must be at least 1, got {threads}")
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=thread_name_prefix)
        self._free = threads
        self._waiting: dict[str, deque[_Call]] = {}
        # A key with waiting calls and none running sits in the ring exactly once; a freed thread starts the oldest
        # waiting call of the key at its head, and that key goes to the back if it has more waiting.
        self._ring: deque[str] = deque()
        self._running: set[str] = set()
        self._closed = False

    async def run(self, key: str, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise RuntimeError("the CPU pool is shut down")
        call = _Call(fn, args, asyncio.get_running_loop().create_future())
        queue = self._waiting.setdefault(key, deque())
        queue.append(call)
        if len(queue) == 1 and key not in self._running:
            self._ring.append(key)
        self._dispatch()
        return await call.done

    def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._free and self._ring:
            key = self._ring.popleft()
            queue = self._waiting[key]
            while queue and queue[0].done.done():
                queue.popleft()
            if not queue:
                del self._waiting[key]
                continue
            call = queue.popleft()
            if not queue:
                del self._waiting[key]
            self._free -= 1
            self._running.add(key)
            started = loop.run_in_executor(self._pool, call.fn, *call.args)
            started.add_done_callback(partial(self._finished, key, call))

    def _finished(self, key: str, call: _Call, started: asyncio.Future) -> None:
        self._free += 1
        self._running.discard(key)
        if self._waiting.get(key):
            self._ring.append(key)
        if not call.done.done():
            if started.cancelled():
                call.done.cancel()
            elif (error := started.exception()) is not None:
                call.done.set_exception(error)
            else:
                call.done.set_result(started.result())
        if not self._closed:
            self._dispatch()

    def shutdown(self) -> None:
        """Refuse new calls, drop waiting ones (their callers see ``CancelledError``), let running ones end."""
        self._closed = True
        for queue in self._waiting.values():
            for call in queue:
                call.done.cancel()
        self._waiting.clear()
        self._ring.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
