"""Top-p nuclei and routed experts: asked for when the trainer replays them, read from SGLang's reply, kept aligned
with every sampled token through turns, retries and a continuation after an abort, spooled and packed.

The scripted server answers with ``durable_rollouts.scripted_policy.replay_data``'s deterministic nuclei and routing, so
every position is checked against what the server says it was."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json

import numpy as np
import pytest

from durable_rollouts.contracts.replay import ReplayCapture, RoutedExpertsShape
from durable_rollouts.contracts.session import SessionConfig
from durable_rollouts.policy.continuation import stitch
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.replay_capture import ReplayDataError, RoutedRows, TopPSpans
from durable_rollouts.policy.session import PolicySession
from durable_rollouts.policy.sglang_client import Generation, PolicyOutputError, SGLangClient, parse_generation
from durable_rollouts.policy.token_capture import LedgerDelta, TokenLedger
from durable_rollouts.policy.trajectory_packing import pack_trajectory, read_trajectory
from durable_rollouts.scripted_policy.replay_data import DEFAULT_MOE, nucleus, routing
from tests.policy.replay_sessions import SYSTEM, TASK, capturing_session
from tests.policy.replies import anthropic_reply
from tests.policy.scripted_controls import control, weight_update
from tests.waiting import until


def b64(values) -> str:
    return base64.b64encode(np.asarray(values, dtype="<i4").tobytes()).decode()


def reply(ids, **meta) -> dict:
    return {
        "meta_info": {
            "output_token_logprobs": [[-0.5, t, None] for t in ids],
            "finish_reason": {"type": "stop"},
            **meta,
        }
    }


def test_a_reply_without_what_was_asked_for_or_with_data_that_does_not_fit_is_refused():
    with pytest.raises(PolicyOutputError, match="top_p_token_ids"):
        parse_generation(reply([5, 6]), 100, 3, top_p=True)
    with pytest.raises(PolicyOutputError, match="offsets from 0 to"):
        parse_generation(
            reply([5, 6], top_p_token_ids=b64([5, 6]), top_p_token_offsets=b64([0, 1])), 100, 3, top_p=True
        )
    with pytest.raises(PolicyOutputError, match="routed_experts"):
        parse_generation(reply([5, 6]), 100, 3, routed_width=4)
    with pytest.raises(PolicyOutputError, match=r"expected 4 rows x 4"):
        parse_generation(reply([5, 6], routed_experts=b64(range(12))), 100, 3, routed_width=4)
    parsed = parse_generation(
        reply([5, 6], top_p_token_ids=[5, 1, 6], top_p_token_offsets=[0, 2, 3], routed_experts=b64(range(16))),
        100,
        3,
        True,
        4,
    )
    assert (
        parsed.top_p is not None
        and parsed.top_p.ids.tolist() == [5, 1, 6]
        and parsed.top_p.offsets.tolist() == [0, 2, 3]
    )
    assert parsed.routed is not None and parsed.routed.start == 0 and parsed.routed.rows.shape == (4, 4)


def test_continued_pieces_join_and_a_gap_in_the_routing_is_an_error():
    first = Generation(
        [5],
        [-1.0],
        "abort",
        top_p=TopPSpans(np.array([5, 9]), np.array([0, 2])),
        routed=RoutedRows(0, np.ones((3, 2), np.uint16)),
    )
    second = Generation(
        [6],
        [-1.0],
        "stop",
        top_p=TopPSpans(np.array([6]), np.array([0, 1])),
        routed=RoutedRows(0, np.full((4, 2), 7, np.uint16)),
    )
    joined = stitch([first, second], "stop")
    assert joined.top_p.ids.tolist() == [5, 9, 6] and joined.top_p.offsets.tolist() == [0, 2, 3]
    assert joined.routed.rows[:, 0].tolist() == [1, 1, 1, 7], (
        "rows held stay; the next piece adds the positions past them"
    )
    late = dataclasses.replace(second, routed=RoutedRows(4, np.zeros((0, 2), np.uint16)))
    with pytest.raises(PolicyOutputError, match="missing for positions 3..4"):
        stitch([first, late], "stop")
    with pytest.raises(ReplayDataError):
        RoutedRows(0, np.ones((1, 2), np.uint16)).then(RoutedRows(2, np.ones((1, 2), np.uint16)))


def assert_replay_matches_the_server(renderer, segments, replay) -> None:
    assert len(replay) == len(segments)
    for segment, data in zip(segments, replay, strict=True):
        for position, (token, mask) in enumerate(zip(segment.tokens, segment.loss_mask, strict=True)):
            expected = nucleus(token, position, renderer.vocab_size) if mask else []
            assert data.nucleus(position).tolist() == expected, f"position {position}"
        assert np.array_equal(
            data.routed.reshape(-1, DEFAULT_MOE.layers, DEFAULT_MOE.top_k), routing(segment.tokens, DEFAULT_MOE)
        )


async def test_nuclei_and_routing_follow_every_position_through_turns_a_retry_the_spool_and_the_pack(
    renderer, scripted_server, http
):
    deltas = []
    policy = capturing_session(
        renderer,
        scripted_server,
        http,
        journal=lambda delta, summary: deltas.append(json.loads(json.dumps(dataclasses.asdict(delta)))),
    )
    first = await policy.run_turn("main", "main", [SYSTEM, TASK], [], None, anthropic_reply)
    echoed = {"role": "assistant", "content": first.parsed.text}
    follow = [SYSTEM, TASK, echoed, {"role": "user", "content": "Go on."}]
    await policy.run_turn("main", "main", follow, [], None, anthropic_reply)
    await policy.run_turn("main", "main", follow, [], None, anthropic_reply)  # the client never saw it: a retry
    await policy.run_turn(
        "agent:1", "subagent", [SYSTEM, {"role": "user", "content": "Look around."}], [], None, anthropic_reply
    )
    assert scripted_server.records[0].sampling_params["custom_params"] == {"return_top_p_token_ids": True}
    segments, replay = policy.ledger.finish(), policy.ledger.replay()
    assert_replay_matches_the_server(renderer, segments, replay)

    restored = TokenLedger(renderer)
    for delta in deltas:
        restored.apply(LedgerDelta(**delta))
    assert restored.replay() == replay, "a worker restarted from the spool holds the same replay data"
    routed_bytes = sum(len(d["routed"]) for d in deltas)
    assert routed_bytes < 2 * sum(len(s.tokens) for s in segments) * DEFAULT_MOE.layers * DEFAULT_MOE.top_k * 2, (
        "each delta carries only new rows"
    )
    unpacked = read_trajectory(pack_trajectory(segments, policy.ledger.turn_log(), replay))
    assert unpacked.replay == replay and unpacked.replay[0].routed.dtype == np.uint16


async def test_a_generation_continued_after_an_abort_keeps_its_replay_data_aligned(renderer, scripted_server, http):
    scripted_server.set_policy(None, "slow")
    scripted_server.delay_s = 3600.0
    policy = capturing_session(renderer, scripted_server, http)
    turn = asyncio.create_task(policy.run_turn("main", "main", [SYSTEM, TASK], [], None, anthropic_reply))
    await until(lambda: any(g.output_ids for g in scripted_server.control.live))
    await weight_update(http, scripted_server, "abort", "1")
    scripted_server.delay_s = 0.0
    await control(http, scripted_server, "/continue_generation", {})
    await turn
    assert policy.turns[0].aborts_continued == 1 and len(scripted_server.records) == 2
    assert_replay_matches_the_server(renderer, policy.ledger.finish(), policy.ledger.replay())


async def test_a_trainer_whose_routing_shape_is_not_the_servers_fails_the_turn_naming_it(
    renderer, scripted_server, http
):
    wrong = ReplayCapture(routed_experts=RoutedExpertsShape(layers=DEFAULT_MOE.layers + 1, top_k=DEFAULT_MOE.top_k))
    client = SGLangClient(http, vocab_size=renderer.vocab_size)
    policy = PolicySession(
        "s2",
        SessionConfig(policy_url=scripted_server.url, replay=wrong),
        renderer,
        client,
        FairExecutor(2, thread_name_prefix="test-cpu"),
    )
    with pytest.raises(PolicyOutputError, match="routed_experts"):
        await policy.run_turn("main", "main", [SYSTEM, TASK], [], None, anthropic_reply)
    assert policy.ledger.finish() == []
