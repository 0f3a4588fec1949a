"""A real headless Chromium, driven over the DevTools protocol, for tests of the HTML report.

No webdriver and no Python package: Chromium's `--remote-debugging-pipe` reads
DevTools commands (JSON, each ended by a NUL byte) on its fd 3 and writes replies and
events on its fd 4, so two pipes and `json` are the whole client (the transport
Puppeteer uses). Clicks and key presses go through `Input.dispatch*Event`: they are
trusted input events, hit-tested by the browser at page coordinates like a user's.

    with Browser() as b:
        b.open("file:///tmp/report.html")
        b.click("#row-4 .e-CRASH")
        text = b.eval("document.querySelector('.panel:not([hidden])').innerText")
        b.screenshot("shot.png")
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM = "/usr/bin/chromium"          # Debian's package `chromium`
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
         "--remote-debugging-pipe"]
TIMEOUT = 30.0                          # seconds for one command; Chromium answers in ms


class BrowserError(Exception):
    """Chromium exited, timed out, or answered a command with an error."""


class Browser:
    def __init__(self, width: int = 1400, height: int = 820, chromium: str = CHROMIUM):
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="cmc-chromium-")
        self.log = open(os.path.join(self.profile, "chromium.log"), "w+b")
        cmd_r, self._cmd_w = os.pipe()      # we write commands; Chromium reads them on fd 3
        self._evt_r, evt_w = os.pipe()      # Chromium writes on fd 4; we read

        def on_fds_3_and_4():
            os.dup2(cmd_r, 3)
            os.dup2(evt_w, 4)
        self.proc = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=on_fds_3_and_4, pass_fds=(3, 4))
        os.close(cmd_r)
        os.close(evt_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.session = None
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # -- the protocol ------------------------------------------------------------------
    def send(self, method: str, params: dict | None = None) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            got = self._read()
            if got.get("id") == self._next_id:
                if "error" in got:
                    raise BrowserError(f"{method}: {got['error']}")
                return got.get("result", {})
            self.events.append(got)

    def _read(self) -> dict:
        deadline = time.monotonic() + TIMEOUT
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._evt_r], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer within {TIMEOUT:g}s{self._tail()}")
            chunk = os.read(self._evt_r, 1 << 16)
            if not chunk:
                raise BrowserError(f"Chromium exited{self._tail()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\0", 1)
        return json.loads(line)

    def _tail(self) -> str:
        self.log.flush()
        self.log.seek(0)
        text = self.log.read()[-2000:].decode(errors="replace").strip()
        return f"; its log ends:\n{text}" if text else ""

    def wait_event(self, method: str) -> dict:
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read())

    # -- what a test does --------------------------------------------------------------
    def open(self, url: str) -> None:
        """Load `url` and wait for its load event."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expression: str):
        got = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in got:
            raise BrowserError(f"{expression}: {got['exceptionDetails']}")
        return got["result"].get("value")

    def click(self, selector: str) -> None:
        """A left click at the middle of the first element `selector` matches,
        scrolled into view first; the browser decides what is under the pointer."""
        box = self.eval(f"""(function () {{
            var e = document.querySelector({json.dumps(selector)});
            if (!e) return null;
            e.scrollIntoView({{block: 'center', inline: 'center'}});
            var r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2];
        }})()""")
        if box is None:
            raise BrowserError(f"nothing matches {selector}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1})

    def key(self, key: str, code: int) -> None:
        """Press and release a key: e.g. key("ArrowUp", 38)."""
        for kind in ("rawKeyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key,
                                                 "windowsVirtualKeyCode": code})

    def requests(self) -> list[str]:
        """The URL of every request the page made so far."""
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: str) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    # -- lifetime ----------------------------------------------------------------------
    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.session = None
                try:
                    self.send("Browser.close")
                except (BrowserError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._cmd_w, self._evt_r):
                os.close(fd)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
