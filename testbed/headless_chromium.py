"""Debian's Chromium, headless, driven over the DevTools protocol (a websocket, ``aiohttp``): open a page, run
script in it, move the mouse, take a screenshot, count what it asked of the network.

Invariants: one browser per ``HeadlessChromium`` block, with a profile folder of its own (also its ``TMPDIR``,
where Chromium keeps its singleton socket) removed at exit and the browser's process group killed with it;
``open`` waits for the page's load event; every request the page makes other than ``file:`` and ``data:`` URLs
is kept in ``network_requests``, so a test can assert a page fetched nothing.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]
LISTENING = re.compile(rb"DevTools listening on (ws://[^\s]+)")


class ChromiumMissing(RuntimeError):
    """No ``chromium`` on PATH (``make setup`` installs Debian's)."""


class HeadlessChromium:
    def __init__(self, width: int = 1400, height: int = 1000):
        self.width, self.height = width, height
        self.network_requests: list[str] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._events: dict[str, asyncio.Event] = {}
        self._process: asyncio.subprocess.Process | None = None
        self._profile = ""
        self._http: aiohttp.ClientSession | None = None
        self._socket: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task | None = None

    @property
    def profile(self) -> Path:
        """The browser's own folder (its profile and its ``TMPDIR``), gone once the block exits."""
        return Path(self._profile)

    @property
    def process_group(self) -> int:
        """The browser's process group (its session's), killed once the block exits."""
        assert self._process is not None, "inside the block"
        return self._process.pid

    async def __aenter__(self) -> HeadlessChromium:
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise ChromiumMissing("chromium not found on PATH: make setup installs Debian's chromium")
        self._profile = tempfile.mkdtemp(prefix="rollout-chromium-")
        scratch = Path(self._profile, "tmp")
        scratch.mkdir()
        self._process = await asyncio.create_subprocess_exec(
            binary,
            *FLAGS,
            f"--user-data-dir={self._profile}",
            f"--window-size={self.width},{self.height}",
            "about:blank",
            env={**os.environ, "TMPDIR": str(scratch)},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert self._process.stderr is not None
        browser_url = await asyncio.wait_for(self._listening(self._process.stderr), 60)
        port = browser_url.split(":")[2].split("/")[0]
        self._http = aiohttp.ClientSession()
        async with self._http.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json()
        page = next(t for t in targets if t.get("type") == "page")
        self._socket = await self._http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Network"):
            await self.send(f"{domain}.enable")
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._socket is not None:
            await self._socket.close()
        if self._http is not None:
            await self._http.close()
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            await self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    @staticmethod
    async def _listening(stderr: asyncio.StreamReader) -> str:
        while line := await stderr.readline():
            if found := LISTENING.search(line):
                asyncio.get_running_loop().create_task(_drain(stderr))
                return found.group(1).decode()
        raise RuntimeError("chromium exited before it listened for DevTools")

    async def _read(self) -> None:
        assert self._socket is not None
        async for message in self._socket:
            data = json.loads(message.data)
            if "id" in data and (future := self._pending.pop(data["id"], None)) is not None:
                if "error" in data:
                    future.set_exception(RuntimeError(f"DevTools: {data['error']}"))
                else:
                    future.set_result(data.get("result", {}))
            elif data.get("method") == "Network.requestWillBeSent":
                url = data["params"]["request"]["url"]
                if not url.startswith(("file:", "data:")):
                    self.network_requests.append(url)
            elif "method" in data:
                self._events.setdefault(data["method"], asyncio.Event()).set()

    async def send(self, method: str, **params: Any) -> dict:
        assert self._socket is not None
        number = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[number] = future
        await self._socket.send_json({"id": number, "method": method, "params": params})
        return await asyncio.wait_for(future, 120)

    async def open(self, path: Path) -> None:
        loaded = self._events.setdefault("Page.loadEventFired", asyncio.Event())
        loaded.clear()
        await self.send("Page.navigate", url=path.resolve().as_uri())
        await asyncio.wait_for(loaded.wait(), 120)

    async def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (JSON-serialisable); a script error raises."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(
                f"page script failed: "
                f"{result['exceptionDetails'].get('exception', {}).get('description', result['exceptionDetails'])}"
            )
        return result["result"].get("value")

    async def hover(self, x: float, y: float) -> None:
        await self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    async def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = await self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params |= {
                "clip": {"x": 0, "y": 0, "width": size[0], "height": min(size[1], 12000), "scale": 1},
                "captureBeyondViewport": True,
            }
        shot = await self.send("Page.captureScreenshot", **params)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
