"""Top-p replay and routing replay against slime's code: slime's own ``Sample.append_response_tokens`` reads the
reply the project reads the same way, and slime's conversion (top-p asserts of ``slime/ray/rollout.py``) and
``validate_rollout_routed_experts_for_replay`` take the samples the contracts write, aborted ones included."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.against_slime import require_slime

require_slime()

from slime.observability.rollout_data_utils import validate_rollout_routed_experts_for_replay  # noqa: E402
from slime.utils.types import Sample  # noqa: E402

from durable_rollouts.policy.sglang_client import parse_generation  # noqa: E402
from durable_rollouts.slime_samples import current  # noqa: E402
from tests.against_slime.slime_code import args_for, slime_conversion  # noqa: E402
from tests.policy.replay_sessions import CAPTURE, OPTIONS, SYSTEM, TASK, captured_trajectory  # noqa: E402
from tests.slime_samples.segments import result_of  # noqa: E402

LAYERS, TOP_K = CAPTURE.routed_experts.layers, CAPTURE.routed_experts.top_k


def replay_args(**extra) -> SimpleNamespace:
    replay = {
        "rollout_top_p": 0.9,
        "use_rollout_routing_replay": True,
        "num_layers": LAYERS,
        "moe_router_topk": TOP_K,
        "moe_layer_freq": [1] * LAYERS,
    }
    return args_for(**(replay | extra))


async def test_slime_reads_the_reply_the_project_reads(renderer, scripted_server, http):
    prompt = renderer.encode(renderer.render([SYSTEM, TASK], [], True))
    body = {
        "input_ids": prompt,
        "sampling_params": {"max_new_tokens": 24, "custom_params": {"return_top_p_token_ids": True}},
        "return_logprob": True,
        "return_routed_experts": True,
    }
    async with http.post(f"{scripted_server.url}/generate", json=body) as response:
        reply = await response.json()
    ours = parse_generation(reply, renderer.vocab_size, len(prompt), top_p=True, routed_width=LAYERS * TOP_K)
    theirs = Sample(tokens=list(prompt))
    meta = reply["meta_info"]
    ids, log_probs = [t[1] for t in meta["output_token_logprobs"]], [t[0] for t in meta["output_token_logprobs"]]
    theirs.append_response_tokens(replay_args(), tokens=ids, log_probs=log_probs, meta_info=meta)
    assert theirs.rollout_top_p_token_ids.tolist() == ours.top_p.ids.tolist()
    assert theirs.rollout_top_p_token_offsets.tolist() == ours.top_p.offsets.tolist()
    assert np.array_equal(
        theirs.rollout_routed_experts.numpy(), ours.routed.rows.astype(np.int32).reshape(-1, LAYERS, TOP_K)
    )


async def test_slimes_conversion_and_routing_validator_take_the_contracts_samples(renderer, scripted_server, http):
    trajectory = await captured_trajectory(renderer, scripted_server, http)
    samples = current.samples(Sample(index=0, group_index=0), result_of(), trajectory, None, OPTIONS)
    samples.append(current.aborted(Sample(index=1, group_index=0), "wall_clock_timeout", OPTIONS))
    for sample in samples:
        sample.rollout_id = sample.index
    args = replay_args()
    data = slime_conversion(args)._convert_samples_to_train_data(samples)
    assert len(data["rollout_top_p_token_ids"]) == len(samples) and len(data["rollout_routed_experts"]) == len(samples)
    validate_rollout_routed_experts_for_replay(data["rollout_routed_experts"], args)
    with pytest.raises(ValueError, match="expected="):
        validate_rollout_routed_experts_for_replay(data["rollout_routed_experts"], replay_args(num_layers=LAYERS + 1))
