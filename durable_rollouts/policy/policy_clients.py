"""The policy engines the adapter speaks, behind one small protocol and a registry by engine name.

A session's ``SessionConfig.engine`` picks its client; SGLang (``/generate``) is the default and vLLM
(``/inference/v1/generate``) the other. Every client takes the turn's sampling parameters in SGLang's keys
(``sampling.sglang_params``) and hands back a ``Generation`` with SGLang's meanings, so sessions, continuations,
staleness and the ledger are the same whichever engine samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import aiohttp

from durable_rollouts.contracts.session import PolicyEngine
from durable_rollouts.policy.sglang_client import Generates, SGLangClient
from durable_rollouts.policy.vllm_client import VLLMClient


class PolicyClient(Generates, Protocol):
    """One engine's protocol: sample a turn (aborting it upstream when cancelled), abort a request by the rid the
    caller gave it, and read the weight version the server serves."""

    engine: str

    async def abort(self, base_url: str, rid: str) -> None: ...

    async def current_weight_version(self, base_url: str) -> str: ...


PolicyClients = Mapping[PolicyEngine, PolicyClient]


def policy_clients(http: aiohttp.ClientSession, vocab_size: int) -> PolicyClients:
    """A client of every engine, sharing one HTTP session."""
    return {"sglang": SGLangClient(http, vocab_size), "vllm": VLLMClient(http, vocab_size)}
