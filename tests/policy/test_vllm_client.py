"""vLLM's token-in/token-out replies read as SGLang's are: the same ``Generation`` with the same checks, and the
turn's SGLang-keyed sampling parameters sent in vLLM's names. The shapes are those of vLLM 0.32's
``GenerateResponse`` (``vllm/entrypoints/scale_out/token_in_token_out/protocol.py``); the real engine answers the
same in ``tests/test_real_engine.py``."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from durable_rollouts.policy.sglang_client import GenerationAborted, PolicyOutputError, PolicyServerError
from durable_rollouts.policy.vllm_client import VLLMClient, parse_vllm_generation, vllm_sampling_params

VOCAB = 100


def reply(ids=(5, 6, 7), finish="stop", **choice) -> dict:
    content = [{"token_id": t, "logprob": -0.5 - i, "rank": 1, "top_logprobs": []} for i, t in enumerate(ids)]
    return {
        "request_id": "generate-tokens-r",
        "choices": [
            {"index": 0, "token_ids": list(ids), "logprobs": {"content": content}, "finish_reason": finish, **choice}
        ],
    }


def test_sglang_keys_are_sent_in_vllms_names_with_the_sampled_tokens_log_prob_asked_for():
    params = {
        "max_new_tokens": 9,
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": -1,
        "stop_token_ids": [2],
        "skip_special_tokens": False,
        "no_stop_trim": True,
        "stop": ["</x>"],
        "custom_params": {"return_top_p_token_ids": True},
    }
    assert vllm_sampling_params(params) == {
        "max_tokens": 9,
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 0,
        "stop_token_ids": [2],
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
        "stop": ["</x>"],
        "logprobs": 0,
    }


def test_a_reply_is_a_generation_with_its_versions_and_matched_stop_string():
    generation = parse_vllm_generation(
        reply(
            stop_reason="</x>",
            weight_versions=[{"version": "1", "start": 0, "end": 2}, {"version": "2", "start": 2, "end": 3}],
        ),
        VOCAB,
    )
    assert (generation.output_ids, generation.log_probs, generation.finish_reason) == (
        [5, 6, 7],
        [-0.5, -1.5, -2.5],
        "stop",
    )
    assert (generation.weight_versions, generation.stop_sequence) == ([(0, 2, "1"), (2, 3, "2")], "</x>")
    assert parse_vllm_generation(reply(stop_reason=2), VOCAB).stop_sequence is None, "a stop token id is no stop string"
    assert parse_vllm_generation(reply(finish="length"), VOCAB).finish_reason == "length"


def test_an_abort_raises_with_what_was_sampled():
    with pytest.raises(GenerationAborted) as aborted:
        parse_vllm_generation(
            reply((5, 6), finish="abort", weight_versions=[{"version": "3", "start": 0, "end": 2}]), VOCAB
        )
    assert (aborted.value.partial.output_ids, aborted.value.partial.weight_versions) == ([5, 6], [(0, 2, "3")])


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"choices": []}, "no single choice"),
        (reply((5, 600)), "choices[0].token_ids[1]: token id 600 outside the vocabulary"),
        ({"choices": [{**reply()["choices"][0], "logprobs": None}]}, "was logprobs honoured"),
        (
            {"choices": [{**reply()["choices"][0], "token_ids": [5, 6, 8]}]},
            "logprobs.content[2] is not the log-prob of token 8",
        ),
        (reply(finish="weird"), "finish_reason 'weird'"),
        (reply(weight_versions=[{"version": "1", "start": 0, "end": 4}]), "choices[0].weight_versions[0] [0, 4)"),
    ],
)
def test_a_reply_that_is_not_a_valid_sample_is_refused_naming_the_field(body, named):
    with pytest.raises(PolicyOutputError, match=named.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        parse_vllm_generation(body, VOCAB)


def test_the_kept_sets_become_the_top_p_nuclei_and_the_routed_experts_the_rows_of_the_calls_positions():
    mask = [[5, 9], [6], [7, 1, 2]]
    routed = np.arange(4 * 2 * 3, dtype=np.int32).reshape(4, 2, 3)  # prompt 2 + output 3 positions: 4 rows
    buffer = io.BytesIO()
    np.save(buffer, routed)
    body = reply(sampling_mask=mask, routed_experts=base64.b64encode(buffer.getvalue()).decode())
    generation = parse_vllm_generation(body, VOCAB, input_length=2, top_p=True, routed_width=6)
    assert (
        generation.top_p is not None
        and generation.top_p.ids.tolist() == [5, 9, 6, 7, 1, 2]
        and generation.top_p.offsets.tolist() == [0, 2, 3, 6]
    )
    assert generation.routed is not None and generation.routed.rows.tolist() == routed.reshape(4, 6).tolist()


def test_replay_data_asked_for_and_missing_or_malformed_is_refused():
    with pytest.raises(
        PolicyOutputError,
        match="no sampling_mask for the top-p replay asked for: start vLLM with --return-sampling-mask",
    ):
        parse_vllm_generation(reply(), VOCAB, top_p=True)
    with pytest.raises(
        PolicyOutputError,
        match="no routed_experts for the routing replay asked for: start vLLM with --enable-return-routed-experts",
    ):
        parse_vllm_generation(reply(), VOCAB, input_length=2, routed_width=6)
    with pytest.raises(PolicyOutputError, match="top_p_token_offsets: 3 offsets"):
        parse_vllm_generation(reply(sampling_mask=[[5], [6]]), VOCAB, top_p=True)
    with pytest.raises(PolicyOutputError, match="not a base64 .npy array"):
        parse_vllm_generation(reply(routed_experts="%%%"), VOCAB, input_length=2, routed_width=6)


@pytest.mark.asyncio(loop_scope="session")
async def test_an_sglang_server_answers_the_vllm_client_with_one_line_naming_the_url_and_the_engine_to_choose(
    policy_server, http
):
    client = VLLMClient(http, VOCAB)
    with pytest.raises(PolicyServerError) as refused:
        await client.generate(policy_server.url, [1, 2, 3], {"max_new_tokens": 4}, "r1", "s")
    assert refused.value.status == 404
    assert str(refused.value) == (
        f"the policy at {policy_server.url} does not speak vllm's protocol: POST /inference/v1/generate answered 404 "
        "(an SGLang server answers /generate: choose engine 'sglang' for it)"
    )


@pytest.mark.asyncio(loop_scope="session")
async def test_an_unreachable_server_is_a_policy_server_error(http):
    with pytest.raises(PolicyServerError, match="unreachable"):
        await VLLMClient(http, VOCAB).generate("http://127.0.0.1:9", [1], {"max_new_tokens": 1}, "r", "s")
