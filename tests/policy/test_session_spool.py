"""The crash spool: what a restarted worker reads back, including after a torn write."""

import dataclasses
import json

import pytest

from durable_rollouts.contracts.session import SessionConfig
from durable_rollouts.contracts.tokens import TurnSummary
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.session_spool import SessionSpool
from durable_rollouts.policy.token_capture import LedgerDelta

CONFIG = SessionConfig(policy_url="http://127.0.0.1:1")


def delta(i: int) -> LedgerDelta:
    return LedgerDelta(
        segment=0,
        kind="main",
        lane="main",
        tools=[] if i == 0 else None,
        rollback=False,
        keep_tokens=0 if i == 0 else 10 * i,
        prompt_tail=list(range(8)),
        output_ids=[1, 2],
        log_probs=[-0.1, -0.2],
        finish_reason="stop",
        keep_messages=0,
        new_messages=[{"role": "assistant", "content": f"turn {i}"}],
    )


def summary(i: int) -> TurnSummary:
    return TurnSummary(
        index=i,
        lane="main",
        kind="main",
        prompt_tokens=8,
        completion_tokens=2,
        finish_reason="stop",
        stop_reason="end_turn",
    )


def test_sessions_come_back_with_their_secret_and_turns(tmp_path):
    spool = SessionSpool(tmp_path)
    spool.open("s1", "s1.secret", CONFIG)
    for i in range(3):
        spool.append("s1", delta(i), summary(i))
    spool.close()
    (restored,) = SessionSpool(tmp_path).load()
    assert (restored.session_id, restored.secret, restored.config) == ("s1", "s1.secret", CONFIG)
    assert [dataclasses.asdict(d) for d, _ in restored.turns] == [dataclasses.asdict(delta(i)) for i in range(3)]
    assert [s.index for _, s in restored.turns] == [0, 1, 2]
    assert oct((tmp_path).stat().st_mode & 0o777) == "0o700"


def test_a_torn_last_line_is_dropped_and_later_turns_stay_readable(tmp_path):
    spool = SessionSpool(tmp_path)
    spool.open("s1", "k", CONFIG)
    spool.append("s1", delta(0), summary(0))
    spool.close()
    with open(tmp_path / "s1.jsonl", "a") as handle:
        handle.write('{"delta": {"segment": 0, "kin')
    again = SessionSpool(tmp_path)
    (first,) = again.load()
    assert len(first.turns) == 1
    again.append("s1", delta(1), summary(1))
    again.close()
    (second,) = SessionSpool(tmp_path).load()
    assert [s.index for _, s in second.turns] == [0, 1]


def test_weight_versions_come_back_and_a_line_written_before_them_reads_with_none(tmp_path):
    spool = SessionSpool(tmp_path)
    spool.open("s1", "k", CONFIG)
    versioned = dataclasses.replace(delta(0), weight_versions=[(0, 1, "41"), (1, 2, "step-42")])
    spool.append("s1", versioned, summary(0))
    spool.close()
    with open(tmp_path / "s1.jsonl") as handle:
        header, line = handle.read().splitlines()
    record = json.loads(line)
    del record["delta"]["weight_versions"]
    with open(tmp_path / "s1.jsonl", "a") as handle:
        handle.write(json.dumps(record) + "\n")
    (restored,) = SessionSpool(tmp_path).load()
    assert [d for d, _ in restored.turns] == [versioned, dataclasses.replace(versioned, weight_versions=[])]


def test_finished_sessions_are_deleted_and_oversized_ones_stop_being_spooled(tmp_path):
    spool = SessionSpool(tmp_path, max_session_bytes=2_000)
    spool.open("done", "k", CONFIG)
    spool.drop("done")
    spool.open("big", "k", CONFIG)
    for i in range(50):
        spool.append("big", delta(i), summary(i))
    assert not (tmp_path / "done.jsonl").exists() and not (tmp_path / "big.jsonl").exists()
    assert SessionSpool(tmp_path).load() == []


@pytest.mark.asyncio(loop_scope="session")
async def test_restored_sessions_nobody_resumes_are_released(renderer, tmp_path):
    before = AdapterServer(renderer, spool=SessionSpool(tmp_path))
    await before.start()
    resumed = before.registry.open_session(CONFIG)
    abandoned = before.registry.open_session(CONFIG)
    transient = before.registry.open_session(CONFIG, durable=False)
    await before.stop()

    after = AdapterServer(renderer, spool=SessionSpool(tmp_path))
    await after.start()
    try:
        assert sorted(after.registry.restore_spooled()) == sorted([resumed.session_id, abandoned.session_id])
        assert after.registry.authenticate(resumed.secret).session_id == resumed.session_id
        assert after.registry.claim(resumed.session_id) is not None
        assert await after.registry.forget_unclaimed() == [abandoned.session_id]
        assert after.registry.get(abandoned.session_id) is None and after.registry.get(transient.session_id) is None
        assert {p.stem for p in tmp_path.glob("*.jsonl")} == {resumed.session_id}
    finally:
        await after.stop()


def test_requests_sent_and_never_answered_come_back_as_in_flight(tmp_path):
    spool = SessionSpool(tmp_path)
    spool.open("s1", "s1.secret", CONFIG)
    spool.request("s1", "s1-1-aa", sent=True)
    spool.request("s1", "s1-1-aa", sent=False)
    spool.append("s1", delta(0), summary(0))
    spool.request("s1", "s1-2-bb", sent=True)
    spool.request("s1", "s1-2-bb-c1", sent=True)
    spool.close()
    [restored] = SessionSpool(tmp_path).load()
    assert restored.in_flight == ["s1-2-bb", "s1-2-bb-c1"] and len(restored.turns) == 1


@pytest.mark.asyncio
async def test_a_restarted_adapter_aborts_upstream_what_the_dead_process_left_in_flight(
    renderer, scripted_server, tmp_path
):
    spool = SessionSpool(tmp_path)
    spool.open("s1", "s1.secret", SessionConfig(policy_url=scripted_server.url))
    spool.request("s1", "s1-3-cc", sent=True)
    spool.close()
    adapter = AdapterServer(renderer, spool=SessionSpool(tmp_path))
    await adapter.start()
    try:
        assert adapter.registry.restore_spooled() == ["s1"]
        assert await adapter.registry.abort_orphaned_requests() == 1
        assert [record.rid for record in scripted_server.aborts] == ["s1-3-cc"]
        assert await adapter.registry.abort_orphaned_requests() == 0, "each is aborted once"
    finally:
        await adapter.stop()
