"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol, with the
web client the worker already has (aiohttp): no browser driver, no new dependency.

`Chromium` starts one browser (a fresh profile, nothing that calls out: no sync, no updates,
no background networking, no request to anything but loopback) and opens pages in it. `Page.load` navigates and waits for the load
event; every script error the page causes on the way is kept in `Page.errors`: an uncaught
exception, a console error, or a browser log entry of level error (a refusal by the page's
Content-Security-Policy is one).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    # nothing leaves the machine: any request but to loopback goes to a dead local proxy, and
    # no name but localhost resolves (a page that fetches fonts or badges gets an error)
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=127.0.0.1;localhost;[::1]",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
]


def binary() -> str | None:
    """The Chromium on PATH (Debian's `chromium`), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    def __init__(self, browser: Chromium, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session
        self.errors: list[str] = []
        self.loaded = asyncio.Event()

    async def send(self, method: str, **params: Any) -> Any:
        return await self.browser.send(method, params, self.session)

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Page.loadEventFired":
            self.loaded.set()
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.errors.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(f"console.{params['type']}: {params.get('args')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            e = params["entry"]
            self.errors.append(f"log ({e.get('source')}): {e.get('text')}")

    async def load(self, url: str, timeout: float = 30.0) -> None:
        self.loaded.clear()
        answer = await self.send("Page.navigate", url=url)
        if answer.get("errorText"):
            raise RuntimeError(f"{url}: {answer['errorText']}")
        await asyncio.wait_for(self.loaded.wait(), timeout)

    async def evaluate(self, expression: str) -> Any:
        """The value of `expression` in the page (DevTools' own evaluation: the page's CSP
        forbids scripts, not the inspector)."""
        r = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll `expression` until it is truthy (a page that renders with JavaScript)."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout}s for {expression}")
            await asyncio.sleep(0.25)

    async def screenshot(
        self, path: Path, width: int = 1280, height: int | None = None, full_page: bool = True
    ) -> bytes:
        """A PNG of the page, `width` wide and as tall as its content (at most `height`), or
        with `full_page` False exactly `height` tall (an app that fills the window)."""
        metrics = {"width": width, "deviceScaleFactor": 1, "mobile": False}
        h = height or 800
        if full_page:
            await self.send(
                "Emulation.setDeviceMetricsOverride", height=600, **metrics
            )  # laid out at `width`
            content = await self.evaluate("document.body.scrollHeight + 24")  # the content and its margin
            h = min(int(content or 800), height or 4000)
        await self.send("Emulation.setDeviceMetricsOverride", height=h, **metrics)
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        png = base64.b64decode(shot["data"])
        path.write_bytes(png)
        return png

    async def close(self) -> None:
        await self.browser.send("Target.closeTarget", {"targetId": self.target})


class Chromium:
    """One headless Chromium process and a DevTools connection to it."""

    def __init__(self, exe: str | None = None, startup_timeout: float = 30.0) -> None:
        found = exe or binary()
        if found is None:
            raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
        self.exe, self.startup_timeout = found, startup_timeout
        self.pages: dict[str, Page] = {}
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1)

    async def __aenter__(self) -> Chromium:
        self.profile = tempfile.mkdtemp(prefix="rb-chromium-")
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [self.exe, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            stdin=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.startup_timeout
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stderr.seek(0)
                said = self.stderr.read()[-2000:].decode(errors="replace")
                await self.stop()
                raise RuntimeError(f"chromium did not start (exit {self.proc.returncode}): {said}")
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self.reader = asyncio.create_task(self.read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        if getattr(self, "reader", None) is not None:
            self.reader.cancel()
        if getattr(self, "ws", None) is not None:
            await self.ws.close()
        if getattr(self, "http", None) is not None:
            await self.http.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def read(self) -> None:
        async for msg in self.ws:
            data = msg.json()
            if "id" in data:
                fut = self.pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    if "error" in data:
                        fut.set_exception(RuntimeError(f"devtools: {data['error']}"))
                    else:
                        fut.set_result(data.get("result", {}))
            elif data.get("sessionId") in self.pages:
                self.pages[data["sessionId"]].on_event(data["method"], data.get("params", {}))

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        i = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[i] = fut
        msg: dict[str, Any] = {"id": i, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        await self.ws.send_json(msg)
        return await asyncio.wait_for(fut, 60)

    async def page(self) -> Page:
        """A new tab, its errors watched from the start."""
        target = (await self.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await self.send("Target.attachToTarget", {"targetId": target, "flatten": True}))[
            "sessionId"
        ]
        page = Page(self, target, session)
        self.pages[session] = page
        for domain in ("Page", "Runtime", "Log"):
            await page.send(f"{domain}.enable")
        return page
