"""The scripted server's SGLang control API, as a trainer calls it mid-rollout."""

from __future__ import annotations

import aiohttp

from durable_rollouts.scripted_policy.server import ScriptedPolicyServer


async def control(http: aiohttp.ClientSession, server: ScriptedPolicyServer, path: str, body: dict) -> None:
    async with http.post(f"{server.url}{path}", json=body) as response:
        assert response.status == 200, await response.text()


async def weight_update(http, server, mode: str, version: str) -> None:
    await control(http, server, "/pause_generation", {"mode": mode})
    await control(
        http,
        server,
        "/update_weights_from_disk",
        {"model_path": f"/ckpt/{version}", "weight_version": version, "flush_cache": mode != "in_place"},
    )
