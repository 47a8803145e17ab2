"""The sample contracts fill slime's replay fields from a captured trajectory: ``rollout_top_p_token_ids`` /
``_offsets`` over the response and ``rollout_routed_experts`` over ``tokens - 1`` positions, in the shapes
``slime/ray/rollout.py`` asserts; aborted samples get placeholders of those shapes."""

from __future__ import annotations

import numpy as np
import pytest

from durable_rollouts.policy.trajectory_packing import Trajectory, pack_trajectory
from durable_rollouts.scripted_policy.replay_data import DEFAULT_MOE, nucleus, routing
from durable_rollouts.slime_samples import current, seed
from durable_rollouts.slime_samples.options import replay_of
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.slime_samples.sample_fields import ReplayMissing
from slime_generate import samples_from_result
from tests.policy.replay_sessions import OPTIONS, captured_trajectory
from tests.slime_sample import Sample
from tests.slime_samples.segments import MAIN, result_of


def assert_slimes_shapes(sample) -> None:
    """What ``_convert_samples_to_train_data`` asserts with top-p < 1, and the routing validator's shape."""
    offsets, ids = sample.rollout_top_p_token_offsets, sample.rollout_top_p_token_ids
    assert len(offsets) == sample.response_length + 1 and int(offsets[-1]) == len(ids) and offsets[0] == 0
    experts = sample.rollout_routed_experts
    assert experts.shape == (len(sample.tokens) - 1, DEFAULT_MOE.layers, DEFAULT_MOE.top_k)


@pytest.mark.parametrize("contract", [current, seed])
async def test_every_trained_token_carries_its_nucleus_and_every_position_its_routing(
    renderer, scripted_server, http, contract
):
    trajectory = await captured_trajectory(renderer, scripted_server, http)
    samples = contract.samples(Sample(index=0, group_index=0), result_of(), trajectory, None, OPTIONS)
    assert len(samples) == (len(trajectory.segments) if contract is seed else 2) >= 2
    for sample in samples:
        assert_slimes_shapes(sample)
        start = len(sample.tokens) - sample.response_length
        for i, mask in enumerate(sample.loss_mask):
            kept = sample.rollout_top_p_token_ids[
                sample.rollout_top_p_token_offsets[i] : sample.rollout_top_p_token_offsets[i + 1]
            ]
            assert kept.tolist() == (nucleus(sample.tokens[start + i], start + i, renderer.vocab_size) if mask else [])
        assert np.array_equal(sample.rollout_routed_experts, routing(sample.tokens, DEFAULT_MOE))


def test_aborted_samples_carry_placeholders_slime_accepts():
    for contract in (current, seed):
        sample = contract.aborted(Sample(index=1), "wall_clock_timeout", OPTIONS)
        assert_slimes_shapes(sample)
        assert np.count_nonzero(sample.rollout_routed_experts) > 0, "slime refuses an all-zero routing capture"
    plain = current.aborted(Sample(index=1), "x")
    assert plain.rollout_top_p_token_ids is None and plain.rollout_routed_experts is None, (
        "nothing asked, nothing written"
    )


def test_a_rollout_without_the_data_the_trainer_replays_is_aborted_naming_it():
    result = result_of().model_copy(update={"trajectory": pack_trajectory([MAIN])})
    (sample,) = samples_from_result(
        Sample(index=0), result, contract=ContractChoice("current", "test"), options=OPTIONS
    )
    assert sample.metadata["abort_reason"] == "replay_data_missing" and sample.remove_sample
    with pytest.raises(ReplayMissing):
        current.samples(Sample(index=0), result, Trajectory([MAIN], None, []), None, OPTIONS)


def test_slimes_flags_say_what_is_replayed():
    class Args:
        rollout_top_p, use_rollout_routing_replay, num_layers, moe_router_topk = 0.95, True, 40, 8

    replay = replay_of(Args())
    assert replay.top_p_token_ids and (replay.routed_experts.layers, replay.routed_experts.top_k) == (40, 8)
    Args.num_layers = None
    with pytest.raises(Exception, match="--num-layers and --moe-router-topk"):
        replay_of(Args())
