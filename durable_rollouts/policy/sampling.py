"""What one turn is sampled with: the trainer's defaults, then the client's overrides, then the trainer's pins.

The rule (``turn_sampling``), key by key, applied in this order:

| SGLang key | 1. default: the trainer's ``SamplingParams`` | 2. client override (Anthropic body) | 3. trainer pin / cap
| |---|---|---|---| | ``temperature`` | ``temperature`` | ``temperature``, a number in [0, 1] | in ``pinned``: the
client's value is ignored | | ``top_p`` | ``top_p`` | ``top_p``, a number in (0, 1] | same | | ``top_k`` | ``top_k`` |
``top_k``, an integer >= 0 (0: no cut, sent as SGLang's -1; -1 accepted) | same | | ``stop`` | ``stop`` (slime's
``--rollout-stop``) | ``stop_sequences``: <= 32 non-blank strings of <= 1000 characters, added after the trainer's |
same (key ``stop_sequences``) | | ``stop_token_ids`` | ``stop_token_ids`` (slime's ``--rollout-stop-token-ids``) | none
| always sent, with the end-of-turn id first | | ``max_new_tokens`` | ``max_new_tokens`` | ``max_tokens``, which can
only lower it | never past the context room (budget - prompt) |

Always sent besides (``sglang_params``): ``stop_token_ids`` = the template's
end-of-turn id and the trainer's, ``skip_special_tokens: false`` and ``no_stop_trim: true`` (the
ledger needs every sampled id, the reply is trimmed by the session).

A value outside its range is refused before anything is sampled
(``client_sampling`` raises ``RequestError`` naming the field; the adapter
answers 400 ``invalid_request_error`` and the session is untouched), also for a
pinned key: an invalid request is invalid whatever the trainer pins. The
ranges are Anthropic's (temperature 0..1, top_p 0..1, top_k >= 0), narrowed
where SGLang refuses a value Anthropic accepts (top_p 0; SGLang 0.5.23
``SamplingParams.verify`` wants top_p in (0, 1] and top_k -1 or >= 1, so an
Anthropic top_k of 0, "no cut", is sent as -1). ``null`` means "not sent".

Stop sequences end a turn the way SGLang ends it (0.5.23 ``schedule_batch``):
after the sampled token that completes one, with ``finish_reason {"type":
"stop", "matched": <the string>}``; a stop string completed by the same token
as an end-of-turn id wins, one completed within ``max_new_tokens`` is still a
stop. Those ids were sampled, so the ledger keeps them (loss_mask 1); the reply
cuts its text before the string and says ``stop_reason: "stop_sequence"``
(``durable_rollouts.policy.session``, ``durable_rollouts.policy.anthropic_reply.reply_stop``).

Note for trainers: SGLang's returned log-probs are those of the
temperature-scaled distribution (``sampler.py``, unless
``SGLANG_RETURN_ORIGINAL_LOGPROB`` is set), so a client-chosen temperature
changes both what is sampled and the recorded log-probs; pin it when the
trainer assumes one temperature.
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
