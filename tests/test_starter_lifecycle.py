"""The starter as a supervisor sees it: SIGTERM stops what it started (the embedded worker too), as Ctrl-C does,
and the demo's console holds the starter's own lines while the worker's log goes beside the results."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from durable_rollouts.paths import PROJECT_ROOT
from tests.local_cluster import start_dev_server
from tests.waiting import HANG_GUARD_S, until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def processes_naming(text: str) -> list[int]:
    """Pids of this host's processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def started(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROJECT_ROOT / "starter.py"),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_until(stream: asyncio.StreamReader, marker: str) -> str:
    seen = ""
    while marker not in seen:
        line = await asyncio.wait_for(stream.readline(), HANG_GUARD_S)
        assert line, f"the stream ended before {marker!r}:\n{seen}"
        seen += line.decode()
    return seen


async def test_sigterm_stops_the_demo_and_its_worker_and_the_console_holds_no_library_log(tmp_path):
    server = await start_dev_server()
    address = server.client.service_client.config.target_host
    empty, out = tmp_path / "empty.jsonl", tmp_path / "demo.jsonl"
    empty.write_text("")
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "ROLLOUT_RESULTS_DIR": str(tmp_path / "results")}
    try:
        demo = await started(env, "demo", "--dataset", str(empty), "--keep-ui", "--out", str(out))
        console = await read_until(demo.stdout, "--keep-ui: the dev server and worker keep running")
        workers = processes_naming(f"worker.py --temporal-address {address}")
        assert len(workers) == 1, "the demo's own worker runs"
        demo.send_signal(signal.SIGTERM)
        rest, err = await asyncio.wait_for(demo.communicate(), HANG_GUARD_S)
        assert demo.returncode == 130 and err.decode().strip().endswith("starter: stopped")
        await until(lambda: not processes_naming(f"worker.py --temporal-address {address}"), poll_s=0.2)
        console += rest.decode()
        assert f"worker log: {tmp_path / 'demo.worker.log'}" in console
        worker_log = (tmp_path / "demo.worker.log").read_text()
        assert f"connected to Temporal at {address}" in worker_log and "PyTorch was not found" not in worker_log
        library = [
            line
            for line in (console + err.decode()).splitlines()
            if " INFO " in line or " WARNING " in line or "PyTorch" in line
        ]
        assert library == [], "library log lines belong in the worker log"
    finally:
        await server.shutdown()


async def test_sigterm_while_run_waits_for_the_server_stops_at_once_in_one_line(tmp_path):
    """The "server" accepts connections and never answers, so the test sees the starter trying to connect (by then
    its handlers are in place) and the starter keeps waiting for it."""
    dialled = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        dialled.set()

    silent = await asyncio.start_server(accept, "127.0.0.1", 0)
    address = f"127.0.0.1:{silent.sockets[0].getsockname()[1]}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}, "TEMPORAL_ADDRESS": address}
    dataset = PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl"
    try:
        run = await started(env, "run", str(dataset), "--server-wait", "600", "--out", str(tmp_path / "out.jsonl"))
        await asyncio.wait_for(dialled.wait(), HANG_GUARD_S)
        assert run.returncode is None, "still waiting for the server"
        run.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(run.communicate(), 30)
        assert (run.returncode, err.decode().strip()) == (130, "starter: stopped")
    finally:
        for writer in held:
            writer.close()
        silent.close()


async def test_a_demo_whose_worker_cannot_start_says_why_in_one_line(tmp_path):
    """The worker's own one-line refusal (here: no agent slots) is what the starter reports, with the log's path."""
    server = await start_dev_server()
    address = server.client.service_client.config.target_host
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "ROLLOUT_RESULTS_DIR": str(tmp_path / "results"),
        "ROLLOUT_AGENT_SLOTS": "0",
    }
    try:
        demo = await started(env, "demo", "--out", str(tmp_path / "demo.jsonl"))
        _, err = await asyncio.wait_for(demo.communicate(), HANG_GUARD_S)
        lines = err.decode().strip().splitlines()
        assert demo.returncode == 1 and len(lines) == 1, err.decode()
        assert lines[0].startswith(
            "starter: worker exited with 1 before it was ready: worker: ROLLOUT_AGENT_SLOTS: must be at least 1, got 0"
        )
        assert lines[0].endswith(f"(its log: {tmp_path / 'demo.worker.log'})")
    finally:
        await server.shutdown()
