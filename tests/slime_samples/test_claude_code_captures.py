"""Both sample contracts over a session built from real Claude Code requests: main, compaction, post-compaction,
sub-agent, answered by the scripted policy server through the adapter over HTTP.

The requests are the captured bodies and headers (``tests/fixtures/claude_code_wire``), sent in the order Claude
Code sends them; the compaction request's history carries the main turn's real reply in place of the captured
one, as Claude Code echoes what it was answered. By its messages the compaction call continues the main call
(system, task, the main reply, its tool result, then the summary request), but the Qwen3.6 template renders
that history without the reply's reasoning, so its tokens part from the main call's where the main reply
begins. What the trainer gets:

* ``seed``: four samples (the compaction one repeats the main conversation as its context), each 1/4 of the reward;
* ``current`` (slime's ``TrajectoryManager``): the drift lies in the last reply span and the summary is short, so
  slime realigns: the main reply becomes context of the compaction sample and is not trained; the
  continuation and the sub-agent are samples of their own; each carries the full reward.
"""

from __future__ import annotations

import numpy as np
import pytest

from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples import current, seed
from durable_rollouts.slime_samples.message_tree import common_prefix
from durable_rollouts.slime_samples.options import SampleOptions
from tests.slime_sample import Sample
from tests.slime_samples.segments import result_of
from tests.wire_fixtures import session_from_captures

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_both_contracts_over_real_claude_code_requests(adapter, policy_server):
    result = await session_from_captures(adapter, policy_server)
    kinds = [(s.lane, s.kind) for s in result.segments]
    assert kinds == [
        ("main", "main"),
        ("main", "compaction"),
        ("main", "continuation"),
        ("agent:a74736570725ddfdc", "subagent"),
    ]
    main, compaction, continuation, subagent = result.segments
    log = result.turn_log
    assert [t.segment for t in log.turns] == [0, 1, 2, 3], "four calls, in the order Claude Code made them"
    shared = common_prefix(np.asarray(main.tokens), np.asarray(compaction.tokens))
    assert shared == main.prompt_length, "the re-rendered history differs exactly where the main reply begins"

    trajectory = Trajectory(result.segments, log)
    old = seed.samples(Sample(index=0, group_index=0), result_of(), trajectory, None, SampleOptions())
    new = current.samples(Sample(index=0, group_index=0), result_of(), trajectory, None, SampleOptions())
    print(
        f"\nsamples (tokens, trained): seed {[(len(s.tokens), sum(s.loss_mask)) for s in old]}, current "
        f"{[(len(s.tokens), sum(s.loss_mask)) for s in new]}"
    )

    trained = sum(sum(s.loss_mask) for s in result.segments)
    assert len(old) == 4 and [s.reward for s in old] == [0.25] * 4
    assert (sum(len(s.tokens) for s in old), sum(sum(s.loss_mask) for s in old)) == (
        sum(len(s.tokens) for s in result.segments),
        trained,
    )
    assert [s.reward for s in new] == [1.0] * len(new) and all(
        s.rollout_id == 0 and len(s.loss_mask) == s.response_length for s in new
    )
    assert [s.tokens for s in new] == [compaction.tokens, continuation.tokens, subagent.tokens]
    assert sum(sum(s.loss_mask) for s in new) == trained - sum(main.loss_mask), (
        "the main reply realigned away, as slime does"
    )
    assert new[0].metadata["segment_kinds"] == ["main", "compaction"] and all(s.metadata["use_tool"] for s in new)
