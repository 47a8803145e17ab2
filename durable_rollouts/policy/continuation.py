"""Generations that live through SGLang aborts: keep what was sampled, resubmit the rest, hand back one generation.

A request the server ends with ``finish_reason.type == "abort"`` (a pause in ``abort`` mode, a weight update with
``abort_all_requests``, anyone's ``/abort_request`` for the rid) is sent again under a rid of its own
(``<rid>-c1``, ``-c2``, …, so a retry never collides with an attempt still running), as prompt + the ids sampled
so far (never text), with ``max_new_tokens`` lowered by what is there; the pieces are stitched into one
``Generation``. docs/slime.md (*Weight updates during rollouts*) gives the retries and the budget.

Invariants:

* every output token is a token the server sampled at that position given exactly the prompt and the output
  tokens before it, with its log-prob and the weight version that sampled it;
* the stitched output never exceeds the first request's ``max_new_tokens``, and a generation aborted without
  progress for ``resume_budget_s`` fails as an unreachable policy's does (an abort loop backs off, never spins).
"""

from __future__ import annotations

import asyncio
import random
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durable_rollouts.contracts.weight_versions import VersionSpan
from durable_rollouts.policy.replay_capture import ReplayDataError, joined
from durable_rollouts.policy.sglang_client import (
    Generates,
    Generation,
    GenerationAborted,
    PolicyOutputError,
    PolicyServerError,
)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0


@dataclass(frozen=True)
class Continued:
    """The stitched generation and how many aborts it lived through."""

    generation: Generation
    aborts: int


def stitch(pieces: Sequence[Generation], finish_reason: str, stop_sequence: str | None = None) -> Generation:
    """One generation from consecutive pieces: ids and log-probs concatenated, version spans shifted to their
    offsets (adjacent spans of one version merged), replay data joined (``replay_capture.joined``);
    ``stop_sequence``: the last piece's matched stop string."""
    ids: list[int] = []
    log_probs: list[float] = []
    spans: list[VersionSpan] = []
    for piece in pieces:
        offset = len(ids)
        for start, end, version in piece.weight_versions:
            start, end = start + offset, end + offset
            if spans and spans[-1][1] == start and spans[-1][2] == version:
                spans[-1] = (spans[-1][0], end, version)
            else:
                spans.append((start, end, version))
        ids.extend(piece.output_ids)
        log_probs.extend(piece.log_probs)
    try:
        top_p, routed = joined([p.top_p for p in pieces]), joined([p.routed for p in pieces])
    except ReplayDataError as error:
        raise PolicyOutputError(str(error)) from None
    return Generation(
        output_ids=ids,
        log_probs=log_probs,
        finish_reason=finish_reason,
        weight_versions=spans,
        stop_sequence=stop_sequence,
        top_p=top_p,
        routed=routed,
    )


def _with_sampled(prompt_ids: Sequence[int], sampled: list[int]) -> Sequence[int]:
    """``prompt_ids`` then ``sampled``: the prompt itself while nothing is sampled (no copy), else a new ``array``
    of the prompt's type code when the prompt is one (one buffer copy), else a list."""
    # A 100k-token prompt never becomes 100k Python ints on the event loop: the JSON encoding, in a worker thread,
    # reads the buffer.
    if not sampled:
        return prompt_ids
    if isinstance(prompt_ids, array):
        return prompt_ids + array(prompt_ids.typecode, sampled)
    return [*prompt_ids, *sampled]


def _retryable(error: PolicyServerError) -> bool:
    """Transport failures, 429 and 5xx; a 4xx (a bad request, a duplicate rid) will not get better."""
    return error.status is None or error.status == 429 or error.status >= 500


async def generate_through_aborts(
    client: Generates,
    base_url: str,
    prompt_ids: Sequence[int],
    sampling_params: dict[str, Any],
    rid: str,
    routing_key: str,
    resume_budget_s: float,
    retry_first_s: float = RETRY_FIRST_S,
    routed_width: int | None = None,
) -> Continued:
    """``client.generate``, continued after every abort as the module docstring says; retries back off from
    ``retry_first_s`` to ``RETRY_MAX_S``, with jitter, so sessions aborted together do not return in lockstep."""
    budget = int(sampling_params["max_new_tokens"])
    stop_ids = set(sampling_params.get("stop_token_ids") or ())
    pieces: list[Generation] = []
    sampled: list[int] = []
    deadline: float | None = None
    delay = retry_first_s
    sent = 0

    async def back_off() -> None:
        nonlocal delay
        await asyncio.sleep(delay * random.uniform(0.5, 1.0))
        delay = min(delay * 2, RETRY_MAX_S)

    while True:
        params = {**sampling_params, "max_new_tokens": budget - len(sampled)}
        request = client.generate(
            base_url,
            _with_sampled(prompt_ids, sampled),
            params,
            f"{rid}-c{sent}" if sent else rid,
            routing_key,
            routed_width,
        )
        sent += 1
        try:
            if deadline is None:
                generation = await request
            else:
                generation = await asyncio.wait_for(request, max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            raise PolicyServerError(f"an aborted generation made no progress for {resume_budget_s:g} s") from None
        except GenerationAborted as aborted:
            partial = aborted.partial
            pieces.append(partial)
            sampled.extend(partial.output_ids)
            if partial.output_ids and partial.output_ids[-1] in stop_ids:
                return Continued(stitch(pieces, "stop"), aborts=len(pieces))
            if len(sampled) >= budget:
                return Continued(stitch(pieces, "length"), aborts=len(pieces))
            if partial.output_ids or deadline is None:
                deadline = time.monotonic() + resume_budget_s
                delay = retry_first_s
            elif time.monotonic() >= deadline:
                raise
            else:
                await back_off()
            continue
        except PolicyOutputError:
            raise
        except PolicyServerError as error:
            if deadline is None or not _retryable(error) or time.monotonic() + delay >= deadline:
                raise
            await back_off()
            continue
        pieces.append(generation)
        aborts = len(pieces) - 1
        # SGLang matches stop strings in one request's own output: one that straddles two pieces is not seen here
        # (``PolicySession`` finds it in the stitched output).
        stitched = stitch(pieces, generation.finish_reason, generation.stop_sequence) if aborts else generation
        return Continued(stitched, aborts=aborts)
