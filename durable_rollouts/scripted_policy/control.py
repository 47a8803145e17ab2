"""SGLang's generation control as the scripted server plays it: pausing, weight versions, aborts.

This models sglang 0.5.23's two halves. The *tokenizer manager* admits ``/generate`` requests and holds the
pause flag; the *engine* (the scheduler) samples the admitted ones, one token per step. A :class:`Generation`
is one admitted request.

Invariants:

* The engine serves one weight version at a time (``version``) and stamps every sampled token with it, so a
  request's ``weight_versions`` spans are the maximal runs of equal versions over its output, half-open and in
  order (:func:`weight_version_spans`). ``reported_version`` (``/get_model_info``) equals ``version`` except
  after an update whose cache flush was refused (:meth:`GenerationControl.update_weights`), as in sglang.
* Any pause closes admission until :meth:`~GenerationControl.resume`. An ``abort`` pause aborts every admitted
  request and returns once all have returned; ``retract`` and ``in_place`` pauses stop the engine, and
  ``retract`` also puts the running requests back in the waiting queue, one retraction each. An aborted
  request ends at its next step with the tokens sampled so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PAUSE_MODES = ("abort", "retract", "in_place")
FLUSH_REFUSED = (
    "Weights were updated, but the cache was not flushed because requests are still running or queued. "
    "Retract or finish them, then call /flush_cache."
)


def abort_finish_reason() -> dict[str, Any]:
    """sglang's ``FINISH_ABORT().to_json()`` for a request aborted while running."""
    return {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}


def weight_version_spans(versions: list[str], current: str) -> list[dict[str, Any]]:
    """The runs of equal versions over the output tokens; no tokens is one empty span of ``current``."""
    # What sglang's ``compute_weight_version_spans`` derives from its version-change events, empty output included.
    spans: list[dict[str, Any]] = []
    for position, version in enumerate(versions):
        if spans and spans[-1]["version"] == version:
            spans[-1]["end"] = position + 1
        else:
            spans.append({"version": version, "start": position, "end": position + 1})
    return spans or [{"version": current, "start": 0, "end": 0}]


@dataclass(eq=False)
class Generation:
    """One admitted ``/generate`` request: what it has sampled so far and its control flags."""

    rid: str
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    retractions: int = 0
    aborted: bool = False
    queued: bool = False

    def sample(self, token: int, logprob: float, version: str) -> None:
        self.output_ids.append(token)
        self.logprobs.append(logprob)
        self.versions.append(version)


class Signal:
    """Wakes every waiter at each ``notify``; a waiter re-checks its own condition."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._event.wait()

    async def wait(self, seconds: float) -> None:
        """Until the next ``notify``, or ``seconds`` at most."""
        try:
            await asyncio.wait_for(self._event.wait(), seconds)
        except TimeoutError:
            pass


class GenerationControl:
    """The pause flag, the engine's state and the served weight version; see the module docstring.

    ``waiting`` counts the requests waiting for admission and ``writers`` the
    weight updates waiting for the running requests to return.
    """

    def __init__(self, weight_version: str = "default"):
        self.version = weight_version
        self.reported_version = weight_version
        self.admission_paused = False
        self.engine_paused = False
        self.waiting = 0
        self._live: dict[str, Generation] = {}
        self.writers = 0
        self._control = Signal()
        self._returned = Signal()

    @property
    def live(self) -> list[Generation]:
        """The admitted requests that have not returned, in admission order."""
        return list(self._live.values())

    async def admit(self, generation: Generation) -> None:
        """Wait while admission is closed, then count ``generation`` as running."""
        self.waiting += 1
        try:
            # A request waiting here is neither refused nor reachable by an abort; a weight update that found the
            # server unpaused (a writer) also holds admission until the running requests have returned.
            await self._control.until(lambda: not self.admission_paused and self.writers == 0)
        finally:
            self.waiting -= 1
        self._live[generation.rid] = generation

    def release(self, generation: Generation) -> None:
        """``generation`` has returned."""
        del self._live[generation.rid]
        self._returned.notify()

    async def next_step(self, generation: Generation) -> bool:
        """Wait for the engine's next step for ``generation``: True to sample a token, False to end it (aborted)."""

        def decided() -> bool:
            # An aborted request still in the running batch of an ``in_place``-paused engine ends only on resume:
            # the engine takes no step while paused.
            if generation.aborted:
                return not self.engine_paused or generation.queued
            return not self.engine_paused

        await self._control.until(decided)
        return not generation.aborted

    async def pace(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the control state changes meanwhile."""
        # Every change of control state (pause, resume, abort, version) notifies, so a paced request reacts at once.
        await self._control.wait(seconds)

    def abort(self, rid: str = "", abort_all: bool = False) -> None:
        """Abort the running requests whose rid starts with ``rid`` (sglang matches by prefix), or all."""
        for generation in self._live.values():
            if abort_all or generation.rid.startswith(rid):
                generation.aborted = True
        self._control.notify()

    async def pause(self, mode: str) -> None:
        """``/pause_generation``; ``mode`` is one of ``PAUSE_MODES``."""
        self.admission_paused = True
        if mode == "abort":
            self.abort(abort_all=True)
            await self._returned.until(lambda: not self._live)
            return
        self.engine_paused = True
        if mode == "retract":
            for generation in self._live.values():
                if not generation.queued:
                    generation.retractions += 1
                    generation.queued = True
        self._control.notify()

    def resume(self) -> None:
        self.admission_paused = False
        self.engine_paused = False
        for generation in self._live.values():
            generation.queued = False
        self._control.notify()

    def set_version(self, version: str) -> None:
        """``/update_weight_version``: the new version is served and reported at once."""
        self.version = self.reported_version = version
        self._control.notify()

    async def update_weights(self, version: str | None, flush_cache: bool) -> bool:
        """``/update_weights_from_disk``; False when the cache flush after it was refused.

        Unpaused, the update waits for every running request to return, and
        admission waits for the update. Paused, it happens at once; then a
        flush is refused while a request is still in the running batch (an
        ``in_place`` pause): the engine serves ``version`` anyway, but the
        reported version stays.
        """
        if not self.admission_paused:
            self.writers += 1
            try:
                await self._returned.until(lambda: not self._live)
            except BaseException:
                self.writers -= 1
                self._control.notify()
                raise
            self.writers -= 1
        flushed = not (flush_cache and any(not generation.queued for generation in self._live.values()))
        if version is not None:
            self.version = version
            if flushed:
                self.reported_version = version
        self._control.notify()
        return flushed
