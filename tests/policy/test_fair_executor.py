"""The adapter's CPU pool with real threads: one thread per key at most, round robin across keys."""

from __future__ import annotations

import asyncio
import threading

import pytest

from durable_rollouts.policy.fair_executor import FairExecutor

pytestmark = pytest.mark.asyncio(loop_scope="session")

HANG_GUARD_S = 60


class Recorder:
    """Calls that note when they start and, if told to, hold their thread until the gate opens."""

    def __init__(self):
        self.started: list[str] = []
        self.gate = threading.Event()
        self._lock = threading.Lock()
        self.running: dict[str, int] = {}
        self.most_running: dict[str, int] = {}

    def call(self, key: str, name: str, hold: bool = False) -> str:
        with self._lock:
            self.started.append(name)
            self.running[key] = self.running.get(key, 0) + 1
            self.most_running[key] = max(self.most_running.get(key, 0), self.running[key])
        try:
            if hold:
                self.gate.wait()
            return name
        finally:
            with self._lock:
                self.running[key] -= 1


async def until_started(recorder: Recorder, count: int) -> None:
    while len(recorder.started) < count:
        await asyncio.sleep(0.01)


async def test_waiting_keys_are_served_round_robin_however_much_one_key_queued():
    pool, rec = FairExecutor(1), Recorder()
    try:
        flood = [asyncio.ensure_future(pool.run("f", rec.call, "f", "f0", True))]
        await until_started(rec, 1)
        flood += [asyncio.ensure_future(pool.run("f", rec.call, "f", f"f{i}")) for i in range(1, 6)]
        others = [asyncio.ensure_future(pool.run(k, rec.call, k, f"{k}{i}")) for i in range(2) for k in "ab"]
        await asyncio.sleep(0)
        rec.gate.set()
        await asyncio.wait_for(asyncio.gather(*flood, *others), HANG_GUARD_S)
    finally:
        rec.gate.set()
        pool.shutdown()
    assert rec.started == ["f0", "a0", "b0", "f1", "a1", "b1", "f2", "f3", "f4", "f5"]
    assert [t.result() for t in flood] == [f"f{i}" for i in range(6)]


async def test_one_key_holds_one_thread_so_another_key_runs_beside_its_backlog():
    pool, rec = FairExecutor(2), Recorder()
    try:
        flood = [asyncio.ensure_future(pool.run("flood", rec.call, "flood", f"f{i}", True)) for i in range(8)]
        await until_started(rec, 1)
        victim = await asyncio.wait_for(pool.run("victim", rec.call, "victim", "v0"), HANG_GUARD_S)
        assert victim == "v0" and not any(t.done() for t in flood)
        assert rec.started == ["f0", "v0"]
        rec.gate.set()
        await asyncio.wait_for(asyncio.gather(*flood), HANG_GUARD_S)
    finally:
        rec.gate.set()
        pool.shutdown()
    assert rec.most_running["flood"] == 1


async def test_a_call_cancelled_while_waiting_never_runs_and_errors_reach_the_caller():
    pool, rec = FairExecutor(1), Recorder()

    def fails():
        raise ValueError("bad input")

    try:
        first = asyncio.ensure_future(pool.run("k", rec.call, "k", "k0", True))
        await until_started(rec, 1)
        dropped = asyncio.ensure_future(pool.run("k", rec.call, "k", "k1"))
        failing = asyncio.ensure_future(pool.run("k", fails))
        last = asyncio.ensure_future(pool.run("k", rec.call, "k", "k2"))
        await asyncio.sleep(0)
        dropped.cancel()
        rec.gate.set()
        assert await asyncio.wait_for(last, HANG_GUARD_S) == "k2"
        with pytest.raises(ValueError, match="bad input"):
            await failing
        assert dropped.cancelled() and await first == "k0"
    finally:
        rec.gate.set()
        pool.shutdown()
    assert rec.started == ["k0", "k2"]
    with pytest.raises(RuntimeError, match="shut down"):
        await pool.run("k", rec.call, "k", "late")


async def test_a_pool_needs_a_thread():
    with pytest.raises(ValueError, match="threads"):
        FairExecutor(0)
