"""What one turn is sampled with: the trainer's defaults, then the client's overrides, then the trainer's pins.

The rule (``turn_sampling``), key by key: the trainer's ``SamplingParams``; then the client's ``temperature``,
``top_p``, ``top_k`` and ``stop_sequences`` (after the trainer's stops), each unless the trainer pins it; then
``max_new_tokens`` lowered to the client's ``max_tokens`` and never past the context room. docs/adapter.md
(*Sampling parameters and stop sequences*) has the table, the ranges and how SGLang ends a turn at a stop string.
``sglang_params`` writes a turn's values in SGLang's keys, with the template's end-of-turn id first in
``stop_token_ids``, ``skip_special_tokens: false`` and ``no_stop_trim: true``: the ledger needs every sampled
id, and the session trims the reply.

Invariant: a value outside its range is refused before anything is sampled, also for a pinned key (an invalid
request is invalid whatever the trainer pins): ``client_sampling`` raises ``RequestError`` naming the field,
the adapter answers 400 ``invalid_request_error`` and the session is untouched. ``null`` means "not sent".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from durable_rollouts.contracts.session import SamplingParams
from durable_rollouts.contracts.tokens import TurnSampling
from durable_rollouts.policy.anthropic_translation import RequestError

MAX_STOP_SEQUENCES = 32
MAX_STOP_SEQUENCE_CHARS = 1000


@dataclass(frozen=True)
class ClientSampling:
    """The sampling keys one Anthropic request set (validated); None / empty: not sent."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: tuple[str, ...] = ()

    def sent(self) -> list[str]:
        """The Anthropic keys this request set, in the rule's order."""
        return [key for key in ("temperature", "top_p", "top_k") if getattr(self, key) is not None] + (
            ["stop_sequences"] if self.stop_sequences else []
        )


def client_sampling(body: dict[str, Any]) -> ClientSampling:
    """The request's ``temperature``, ``top_p``, ``top_k`` and ``stop_sequences``; ``RequestError`` names a bad one."""
    return ClientSampling(
        temperature=_number(body, "temperature", lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]"),
        top_p=_number(
            body, "top_p", lambda v: 0.0 < v <= 1.0, "a number in (0, 1] (the policy server cannot sample with top_p 0)"
        ),
        top_k=_top_k(body.get("top_k")),
        stop_sequences=_stop_sequences(body.get("stop_sequences")),
    )


def turn_sampling(defaults: SamplingParams, client: ClientSampling, max_tokens: int | None, room: int) -> TurnSampling:
    """The rule of the module docstring: ``defaults`` -> ``client`` overrides -> ``defaults.pinned`` and the caps.

    ``max_tokens``: the client's cap (None: none); ``room``: the context
    budget left after the prompt (> 0), which no turn may exceed.
    """
    pinned = set(defaults.pinned)
    values: dict[str, Any] = {
        "temperature": defaults.temperature,
        "top_p": defaults.top_p,
        "top_k": defaults.top_k,
        "stop": list(defaults.stop),
    }
    from_client: list[str] = []
    ignored: list[str] = []
    for key in client.sent():
        if key in pinned:
            ignored.append(key)
            continue
        from_client.append(key)
        if key == "stop_sequences":
            values["stop"] = list(dict.fromkeys([*defaults.stop, *client.stop_sequences]))
        elif key == "top_k":
            # Anthropic's 0 ("no cut") is SGLang's -1: 0.5.23's ``SamplingParams.verify`` wants -1 or at least 1.
            values["top_k"] = -1 if client.top_k == 0 else client.top_k
        else:
            values[key] = getattr(client, key)
    max_new_tokens = min(room, defaults.max_new_tokens, max_tokens or room)
    if max_tokens is not None and max_tokens < min(room, defaults.max_new_tokens):
        from_client.append("max_tokens")
    return TurnSampling(
        **values,
        max_new_tokens=max_new_tokens,
        stop_token_ids=list(defaults.stop_token_ids),
        from_client=from_client,
        ignored=ignored,
    )


def sglang_params(sampling: TurnSampling, end_of_turn_id: int, top_p_token_ids: bool = False) -> dict[str, Any]:
    """The ``sampling_params`` of the ``/generate`` request for a turn sampled with ``sampling``; with
    ``top_p_token_ids`` they ask for every output token's top-p nucleus, as slime asks (``custom_params``)."""
    params: dict[str, Any] = {
        "max_new_tokens": sampling.max_new_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "stop_token_ids": list(dict.fromkeys([end_of_turn_id, *sampling.stop_token_ids])),
        "skip_special_tokens": False,
        "no_stop_trim": True,
    }
    if sampling.stop:
        params["stop"] = list(sampling.stop)
    if top_p_token_ids:
        params["custom_params"] = {"return_top_p_token_ids": True}
    return params


def _number(body: dict[str, Any], field: str, valid, expected: str) -> float | None:
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not valid(value):
        raise RequestError(f"{field}: must be {expected}, got {value!r}")
    return float(value)


def _top_k(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise RequestError(f"top_k: must be an integer >= 0 (0 or -1: no top-k cut), got {value!r}")
    return value


def _stop_sequences(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise RequestError(f"stop_sequences: must be a list of strings, got {type(value).__name__}")
    if len(value) > MAX_STOP_SEQUENCES:
        raise RequestError(f"stop_sequences: at most {MAX_STOP_SEQUENCES} sequences, got {len(value)}")
    for index, stop in enumerate(value):
        if not isinstance(stop, str) or not stop.strip():
            raise RequestError(
                f"stop_sequences[{index}]: must be a string with non-whitespace characters, got {stop!r}"
            )
        if len(stop) > MAX_STOP_SEQUENCE_CHARS:
            raise RequestError(
                f"stop_sequences[{index}]: at most {MAX_STOP_SEQUENCE_CHARS} characters, got {len(stop)}"
            )
    return tuple(dict.fromkeys(value))
