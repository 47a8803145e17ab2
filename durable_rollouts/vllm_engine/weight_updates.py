"""The trainer's side of a weight update on a vLLM engine: pause, load the new weights, stamp the version, resume.

``update_weights(http, url, weights_path, version)`` runs vLLM's RL calls (``VLLM_SERVER_DEV_MODE=1``):
``POST /pause?mode=keep`` (running requests freeze where they are), ``POST /collective_rpc`` with
``reload_weights`` from a safetensors folder (in place, ≈0.5 s for 135M on this CPU), ``POST /reset_prefix_cache``,
``POST /update_weight_version``, then ``POST /resume`` (always, also when a step failed). Tokens sampled after the
resume carry the new version in the replies' ``weight_versions`` spans, so a reply that ran across the update has
two spans. On a GPU the same sequence takes ``/update_weights`` (NCCL / IPC weight transfer) in place of the
reload; every transfer backend is GPU-only, so this CPU build reloads from disk.

What an in-place (``keep``) update means for the trainer: a frozen request goes on over the KV cache its old
weights computed, and cached prefix blocks survive while a frozen request holds blocks (the reset then answers
``success: false``, reported in ``UpdateOutcome``). Tokens sampled that way are exactly reproducible by a trainer
only when the change leaves the keys and values alone; otherwise the log-prob check reports the difference, which is
the off-policy gap an in-flight update creates. ``mode="abort"`` instead ends running requests, which the adapter
continues from what they sampled (``policy.continuation``), over a fresh cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiohttp


class WeightUpdateFailed(RuntimeError):
    """A step of the update was refused; the message names the call and the engine's answer."""


@dataclass(frozen=True)
class UpdateOutcome:
    version: str
    prefix_cache_reset: bool


async def _call(http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any) -> Any:
    async with http.request(method, url, timeout=aiohttp.ClientTimeout(total=120), **kwargs) as response:
        text = await response.text()
        if response.status != 200:
            raise WeightUpdateFailed(f"{method} {url} answered {response.status}: {text[:300]}")
        return await response.json(content_type=None) if text else None


async def update_weights(
    http: aiohttp.ClientSession,
    base_url: str,
    weights_path: Path,
    version: str,
    mode: Literal["keep", "abort"] = "keep",
) -> UpdateOutcome:
    """Pause (``mode``), reload ``weights_path``, reset the prefix cache, set ``version``, resume."""
    await _call(http, "POST", f"{base_url}/pause", params={"mode": mode})
    try:
        await _call(
            http,
            "POST",
            f"{base_url}/collective_rpc",
            json={"method": "reload_weights", "kwargs": {"weights_path": str(weights_path)}},
        )
        reset = await _call(http, "POST", f"{base_url}/reset_prefix_cache")
        await _call(http, "POST", f"{base_url}/update_weight_version", json={"new_version": version})
    finally:
        await _call(http, "POST", f"{base_url}/resume")
    return UpdateOutcome(version=version, prefix_cache_reset=bool(isinstance(reset, dict) and reset.get("success")))
