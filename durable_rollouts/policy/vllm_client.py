"""Client for vLLM's token-in/token-out endpoint, ``POST /inference/v1/generate`` (vLLM 0.32).

The same calls as ``SGLangClient`` (``durable_rollouts.policy.policy_clients``), so sessions, continuations and
the trainer's weight updates do not know which engine samples. A request carries ``token_ids`` and the turn's
sampling parameters, written in SGLang's keys by ``sampling.sglang_params`` and translated here; a reply
(``choices[0]``) becomes a ``Generation`` with SGLang's meanings. docs/vllm.md (*How SGLang's meanings map*)
gives each key both ways, the abort id's prefix and the replay data.

Invariants: a reply that breaks a meaning (an id outside the vocabulary, a log-prob that is not finite or
belongs to another token, overlapping spans or spans past the output, missing replay data that was asked for) is
refused as garbage naming the field, and an abort raises ``GenerationAborted`` with what was sampled. A server
that does not speak this protocol (404; 403 from a vLLM without ``--enable-scale-out``) fails the call with one
line naming the URL, the engine asked for and what to change.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from durable_rollouts.policy.sglang_client import (
    Generation,
    GenerationAborted,
    PolicyOutputError,
    SGLangClient,
    checked_tokens,
    replay_data,
    version_spans,
)

GENERATE_PATH = "/inference/v1/generate"
ABORT_PATH = "/inference/v1/abort_requests"
ENGINE_REQUEST_PREFIX = "generate-tokens-"  # the engine's name for a request: an abort without it is ignored silently
# SGLang's keys the session sends that vLLM names otherwise or does not take; the rest pass as they are.
RENAMED = {"max_new_tokens": "max_tokens", "no_stop_trim": "include_stop_str_in_output"}
NOT_SENT = {"custom_params"}


def vllm_sampling_params(params: dict[str, Any]) -> dict[str, Any]:
    """vLLM's ``sampling_params`` for a turn's SGLang-keyed ``params``."""
    out = {RENAMED.get(key, key): value for key, value in params.items() if key not in NOT_SENT}
    if out.get("top_k") == -1:
        out["top_k"] = 0  # SGLang's "no cut"; vLLM takes 0 (or -1) for it
    out["logprobs"] = 0
    return out


class VLLMClient(SGLangClient):
    """``generate`` / ``abort`` / ``current_weight_version`` against a vLLM server started with
    ``--enable-scale-out`` (and ``VLLM_SERVER_DEV_MODE=1`` for the version and the trainer's update calls); the
    transport is ``SGLangClient``'s, the protocol's parts are vLLM's."""

    engine = "vllm"
    generate_path = GENERATE_PATH
    version_path = "/weight_info"

    def request_body(
        self, input_ids: Sequence[int], sampling_params: dict[str, Any], rid: str, routed_width: int | None
    ) -> dict[str, Any]:
        return {
            "token_ids": input_ids,
            "sampling_params": vllm_sampling_params(sampling_params),
            "request_id": rid,
            "stream": False,
        }

    @staticmethod
    def parse(body: Any, vocab_size: int, input_length: int, top_p: bool, routed_width: int | None) -> Generation:
        return parse_vllm_generation(body, vocab_size, input_length, top_p, routed_width)

    def refusal(self, base_url: str, status: int, detail: str) -> str:
        if status == 404:
            return (
                f"the policy at {base_url} does not speak vllm's protocol: POST {GENERATE_PATH} answered 404 "
                "(an SGLang server answers /generate: choose engine 'sglang' for it)"
            )
        if status == 403:
            return f"the vLLM server at {base_url} refuses {GENERATE_PATH} (403): start it with --enable-scale-out"
        return f"policy server answered HTTP {status}: {detail}"

    def abort_request(self, rid: str) -> tuple[str, dict[str, Any]]:
        return ABORT_PATH, {"request_ids": [ENGINE_REQUEST_PREFIX + rid]}


def parse_vllm_generation(
    body: Any, vocab_size: int, input_length: int = 0, top_p: bool = False, routed_width: int | None = None
) -> Generation:
    """A ``/inference/v1/generate`` reply as a ``Generation`` (module docstring); ``PolicyOutputError`` if it is not
    a valid sample, ``GenerationAborted`` carrying the tokens sampled before an abort."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        raise PolicyOutputError("vLLM reply has no single choice")
    choice = choices[0]
    ids = choice.get("token_ids")
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    if not isinstance(ids, list) or not isinstance(content, list) or len(content) != len(ids):
        raise PolicyOutputError(
            "vLLM reply: choices[0].token_ids and logprobs.content must be lists of one length: was logprobs honoured?"
        )
    pairs = [
        (entry.get("logprob") if isinstance(entry, dict) else None, token)
        for entry, token in zip(content, ids, strict=True)
    ]
    for position, (entry, token) in enumerate(zip(content, ids, strict=True)):
        if not isinstance(entry, dict) or entry.get("token_id") != token:
            raise PolicyOutputError(f"vLLM reply: logprobs.content[{position}] is not the log-prob of token {token!r}")
    output_ids, log_probs = checked_tokens(pairs, vocab_size, "choices[0].token_ids")
    finish = choice.get("finish_reason")
    if finish not in ("stop", "length", "abort"):
        raise PolicyOutputError(f"vLLM reply: finish_reason {finish!r} is not stop, length or abort")
    stop_reason = choice.get("stop_reason")
    generation = Generation(
        output_ids=output_ids,
        log_probs=log_probs,
        finish_reason=finish,
        weight_versions=version_spans(choice.get("weight_versions"), len(output_ids), "choices[0].weight_versions"),
        stop_sequence=stop_reason if finish == "stop" and isinstance(stop_reason, str) else None,
        **_replay_data(choice, len(output_ids), input_length, top_p, routed_width),
    )
    if finish == "abort":
        raise GenerationAborted(f"vLLM aborted the request after {len(output_ids)} tokens", generation)
    return generation


def _replay_data(
    choice: dict[str, Any], n_tokens: int, input_length: int, top_p: bool, routed_width: int | None
) -> dict[str, Any]:
    """The reply's replay data in the shape SGLang's ``meta_info`` gives it (``replay_capture`` reads that)."""
    meta: dict[str, Any] = {}
    if top_p and choice.get("sampling_mask") is None:
        raise PolicyOutputError(
            "vLLM reply has no sampling_mask for the top-p replay asked for: start vLLM with --return-sampling-mask "
            "(GPU)"
        )
    if routed_width and choice.get("routed_experts") is None:
        raise PolicyOutputError(
            "vLLM reply has no routed_experts for the routing replay asked for: start vLLM with "
            "--enable-return-routed-experts"
        )
    if top_p:
        mask = choice["sampling_mask"]
        if not isinstance(mask, list) or not all(isinstance(kept, list) for kept in mask):
            raise PolicyOutputError("vLLM reply: sampling_mask is not a list of kept-id lists")
        meta["top_p_token_ids"] = [token for kept in mask for token in kept]
        meta["top_p_token_offsets"] = np.cumsum([0, *map(len, mask)]).tolist()
    if routed_width:
        meta["routed_experts"] = _routed_rows(choice["routed_experts"])
    return replay_data(meta, n_tokens, input_length, top_p, routed_width)


def _routed_rows(encoded: Any) -> list[int]:
    try:
        rows = np.load(io.BytesIO(base64.b64decode(encoded, validate=True)), allow_pickle=False)
    except (TypeError, ValueError, binascii.Error, OSError) as error:
        raise PolicyOutputError(f"vLLM reply: routed_experts is not a base64 .npy array: {error}") from None
    if rows.ndim != 3 or not np.issubdtype(rows.dtype, np.integer):
        raise PolicyOutputError(
            f"vLLM reply: routed_experts has shape {rows.shape} of {rows.dtype}, not (positions, layers, top_k) ids"
        )
    return rows.reshape(-1).tolist()
