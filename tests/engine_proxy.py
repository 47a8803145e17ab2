"""A recording proxy in front of a real vLLM engine: what the adapter asked for and what the engine answered.

Every ``POST /inference/v1/generate`` is forwarded as it came and recorded (the request's ``request_id``,
``token_ids`` and ``sampling_params``, the reply's choice) in arrival order; ``in_flight`` holds the ids of those
not answered yet. Every other path is forwarded untouched, so aborts, versions and the trainer's calls work through
it too. The tests compare each trained token of a trajectory with these records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

GENERATE = "/inference/v1/generate"


@dataclass
class Exchange:
    request_id: str
    token_ids: list[int]
    sampling_params: dict[str, Any]
    reply: dict[str, Any] | None = None  # the engine's choices[0]; None until answered (or when it failed)

    @property
    def output_ids(self) -> list[int]:
        return list(self.reply["token_ids"]) if self.reply else []

    @property
    def log_probs(self) -> list[float]:
        return [entry["logprob"] for entry in self.reply["logprobs"]["content"]] if self.reply else []


@dataclass
class RecordingProxy:
    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)
    in_flight: set[str] = field(default_factory=set)
    _runner: web.AppRunner | None = None
    _http: aiohttp.ClientSession | None = None
    url: str = ""

    def of_session(self, session_id: str) -> list[Exchange]:
        """The answered exchanges of an adapter session (its request ids start with the session id)."""
        return [e for e in self.exchanges if e.request_id.startswith(f"{session_id}-") and e.reply is not None]

    async def start(self) -> str:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        body = await request.read()
        exchange = None
        if request.path == GENERATE and request.method == "POST":
            sent = json.loads(body)
            exchange = Exchange(sent.get("request_id", ""), sent["token_ids"], sent["sampling_params"])
            self.exchanges.append(exchange)
            self.in_flight.add(exchange.request_id)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        try:
            async with self._http.request(
                request.method, f"{self.upstream}{request.path_qs}", data=body, headers=headers
            ) as response:
                payload = await response.read()
                if exchange is not None and response.status == 200:
                    exchange.reply = json.loads(payload)["choices"][0]
                return web.Response(status=response.status, body=payload, content_type=response.content_type)
        except aiohttp.ClientError as error:
            return web.Response(status=502, text=f"proxy: upstream {self.upstream} failed: {error}")
        finally:
            if exchange is not None:
                self.in_flight.discard(exchange.request_id)
