"""A bench's child processes: each runs one role of the bench's own module, says READY and serves until told to stop.

The protocol: the parent starts ``python -m <bench module> --role <role> ...`` from the checkout root, in a session
of its own (a Ctrl-C in the terminal reaches only the parent, which then stops its children), with pipes on stdin
and stdout. Once the child serves it prints one line, ``READY <url> [<url> ...]``, and then runs until SIGTERM,
SIGINT or the end of its stdin (the parent closed it, or died), so no child outlives its bench.

Standard library and the project's paths only: the adapter a bench measures runs in such a child.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import time

from durable_rollouts.paths import PROJECT_ROOT

READY = "READY"
READY_TIMEOUT_S = 120.0


class BenchError(RuntimeError):
    """The bench cannot go on (a child did not start, a request was refused): it says why and exits 1."""


def announce_ready(*urls: str) -> None:
    """The child's one line to its parent, once it serves ``urls``."""
    print(" ".join((READY, *urls)), flush=True)


async def until_told_to_stop() -> None:
    """Serve until SIGTERM/SIGINT or until the parent closes our stdin (it died or is done)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    fd = sys.stdin.fileno()

    def on_stdin() -> None:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            stop.set()

    loop.add_reader(fd, on_stdin)
    await stop.wait()


def start_role(module: str, role_args: list[str]) -> subprocess.Popen:
    """``python -m <module> <role_args>`` from the checkout root, in its own session, stdin and stdout piped."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *role_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=PROJECT_ROOT,
        start_new_session=True,
    )


def read_ready(proc: subprocess.Popen, role: str) -> list[str]:
    """The URLs of the child's READY line; ``BenchError`` if it exits, says something else or is silent for
    ``READY_TIMEOUT_S``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None:
                raise BenchError(f"{role} process did not start (exit code {proc.poll()})")
            if selector.select(timeout=min(remaining, 1.0)):
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    raise BenchError(f"{role} process closed stdout (exit code {proc.wait(5)})")
                buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    if not line.startswith(f"{READY} "):
        raise BenchError(f"{role} process said {line!r}")
    return line.split()[1:]


def stop_process(proc: subprocess.Popen) -> None:
    """Close its stdin, SIGTERM it, SIGKILL it after 10 s; its pipes are closed afterwards."""
    if proc.poll() is None:
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream:
                stream.close()
        except OSError:
            pass
