"""Drive a real headless Chromium through its DevTools protocol over ``--remote-debugging-pipe``.

Chromium reads protocol messages (JSON, each ended by a NUL byte) from file descriptor 3 and writes
its answers and events to descriptor 4 (chromium's ``--remote-debugging-pipe`` switch), so no
WebSocket client is needed. Clicks are real input events (``Input.dispatchMouseEvent`` at the
element's centre), not ``element.click()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class DevToolsError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Chromium:
    """One headless browser; :meth:`open` gives a :class:`Page` (a tab attached in flat mode)."""

    def __init__(self, profile: Path) -> None:
        if CHROMIUM is None:
            raise DevToolsError("Debian's chromium is not installed (apt-get install chromium)")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # runs in the child before exec: the pipe ends become fds 3 and 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "--no-first-run", "--window-size=1280,1000",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(3, 4),
            preexec_fn=wire)  # noqa: PLW1509 (single-threaded enough: only dup2 before exec)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._lock = threading.Lock()
        self._next_id = 0
        self._answers: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 65536)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._cond:
                        self._answers[message["id"]] = message
                        self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, method: str, params: dict | None = None, *, session: str | None = None,
             timeout_s: float = 30.0) -> dict:
        with self._lock:
            self._next_id += 1
            number = self._next_id
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while number not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise DevToolsError(f"no answer to {method} within {timeout_s} s")
                self._cond.wait(min(left, 0.5))
            answer = self._answers.pop(number)
        if "error" in answer:
            raise DevToolsError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open(self, url: str) -> Page:
        target = self.send("Target.createTarget", {"url": url})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        # The new tab holds about:blank (already "complete") until the navigation commits.
        page.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'", 30.0,
                      f"{url} to load")
        return page

    def close(self) -> None:
        with contextlib.suppress(DevToolsError):
            self.send("Browser.close", timeout_s=5.0)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)


class Page:
    """One tab: evaluate JavaScript, wait for a condition, click and type like a person."""

    def __init__(self, browser: Chromium, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session

    def evaluate(self, expression: str) -> Any:
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression!r} raised {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float, what: str, poll_s: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout_s} s waiting for {what} ({expression})")
            time.sleep(poll_s)

    def click(self, selector: str) -> None:
        """Press and release the left mouse button at the centre of ``selector`` (scrolled into view)."""
        box = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
                            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                            " return {x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width}; })()")
        if not box or not box["w"]:
            raise DevToolsError(f"no visible element {selector!r} to click")
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.send("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"],
                                                           "button": "left", "clickCount": 1}, session=self.session)

    def type_into(self, selector: str, text: str) -> None:
        self.click(selector)
        self.evaluate(f"document.querySelector({json.dumps(selector)}).value = ''")
        self.browser.send("Input.insertText", {"text": text}, session=self.session)

    def text(self, selector: str) -> str:
        return self.evaluate(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''")

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})
