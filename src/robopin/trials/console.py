"""The operator console: one local web page to watch the stack, instruct it, stop it and judge trials.

:class:`ConsoleServer` serves the page and a small JSON API on a loopback address with the standard
library's :class:`http.server.ThreadingHTTPServer`. It is a thin client: everything about the robot
goes through a *link* (:class:`ConsoleLink`, implemented over ROS by ``robopin_ros.operator_console``)
— the live views, the task's stage, the ``Instruct`` call and Stop — and everything about a batch
through the :class:`~robopin.trials.operator.OperatorProtocol` of ``robopin trial``, which validates
every answer. One page at a time holds the operator's seat (a second page may watch, and take the
seat over when asked to); Stop works from every page. No rclpy here.

API (JSON unless noted): ``GET /`` the page; ``GET /api/state`` (with ``limits.instruction_chars``, the planner's
own limit); ``GET /api/view/<kind>/<view>.png``
(kind ``camera`` or ``reasoning``); ``GET /api/reference.png``; ``POST /api/claim`` ``{force}``;
``POST /api/release``; ``POST /api/instruct`` ``{instruction, dry_run}``; ``POST /api/stop``;
``POST /api/scene_ready`` ``{trial_id}``; ``POST /api/judge`` ``{trial_id, success, reason, note,
subgoals}``. Refusals answer 4xx with ``{"error": <code>, "message": <text>}``.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from robopin.trials.judging import JudgementError
from robopin.trials.operator import OperatorError, OperatorProtocol, SceneRequest
from robopin.vlm.prompts import MAX_INSTRUCTION_CHARS

__all__ = ["ConsoleError", "ConsoleLink", "ConsoleServer", "OperatorSeat"]

SEAT_TIMEOUT_S = 8.0
"""A page that has not polled for this long has gone (closed tab, lost network); its seat is free."""
_MAX_BODY = 64 * 1024
FINAL_STATE_WAIT_S = 2.0
"""On close during a batch, how long the server waits for the operator's page to read the batch's end."""


class ConsoleError(ValueError):
    """The console cannot be served as asked (an address that is not loopback, a port in use)."""


class ConsoleLink(Protocol):
    """What the console needs from the robot side (see ``robopin_ros.operator_console.ConsoleRosLink``)."""

    def views(self) -> list[dict[str, Any]]: ...  # [{name, kind, seq}]

    def png(self, kind: str, view: str) -> bytes | None: ...

    def task(self) -> dict[str, Any]: ...  # {stage, step, detail, task_id, status}

    def instruct(self, instruction: str, dry_run: bool) -> dict[str, Any]: ...  # {accepted, task_id, message}

    def stop(self) -> dict[str, Any]: ...  # {ok, message, ...}


class _RefusedError(Exception):
    def __init__(self, status: HTTPStatus, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class OperatorSeat:
    """Which page may act for the operator: one token at a time, freed when its page stops polling."""

    def __init__(self, timeout_s: float = SEAT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._token = ""
        self._seen = 0.0
        self.taken_over = 0

    def _free(self) -> bool:
        return not self._token or time.monotonic() - self._seen > self.timeout_s

    def claim(self, token: str, *, force: bool = False) -> str:
        """Give ``token``'s page (or a new one) the seat; refuse while another live page holds it."""
        with self._lock:
            if token and token == self._token:
                self._seen = time.monotonic()
                return token
            if not self._free() and not force:
                raise _RefusedError(HTTPStatus.CONFLICT, "second_page",
                               "another operator page is open and holds the operator's seat; this page can watch "
                               "and press Stop. Close the other page, or take the seat over.")
            if not self._free():
                self.taken_over += 1
            self._token, self._seen = secrets.token_hex(16), time.monotonic()
            return self._token

    def touch(self, token: str) -> bool:
        with self._lock:
            if token and token == self._token:
                self._seen = time.monotonic()
                return True
            return False

    def require(self, token: str) -> None:
        with self._lock:
            if not token or token != self._token or time.monotonic() - self._seen > self.timeout_s:
                raise _RefusedError(HTTPStatus.FORBIDDEN, "not_operator",
                               "this page does not hold the operator's seat (another page does, or this one was "
                               "idle); reload it or take the seat over")
            self._seen = time.monotonic()

    def release(self, token: str) -> bool:
        with self._lock:
            if token and token == self._token:
                self._token = ""
                return True
            return False

    @property
    def held(self) -> bool:
        with self._lock:
            return not self._free()


class ConsoleServer:
    """Serve the console for ``link`` (and ``protocol`` during a batch) on ``host:port`` (0: any free port)."""

    def __init__(self, link: ConsoleLink, protocol: OperatorProtocol | None = None, *, host: str = "127.0.0.1",
                 port: int = 8765, title: str = "robopin operator console") -> None:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise ConsoleError(f"the console serves loopback only (127.0.0.1, ::1, localhost), not {host!r}: "
                               "it can stop and instruct the arm; reach it from elsewhere through an SSH tunnel")
        self.link, self.protocol, self.title = link, protocol, title
        self.seat = OperatorSeat()
        self.events: list[dict[str, Any]] = []  # what pages did (the trial runner logs it)
        handler = type("ConsoleHandler", (_Handler,), {"console": self})
        try:
            self.httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as error:
            raise ConsoleError(f"cannot serve the console on {host}:{port}: {error.strerror or error}") from None
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._final_seen = threading.Event()  # a page has read the state of a closed batch

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/"

    def start(self) -> ConsoleServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="robopin-console-http", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving. At the end of a batch, first let a page that is polling read that the batch ended
        (it then shows "batch complete" and its table, not a server that stopped answering)."""
        if self.protocol is not None and self.protocol.closed and self._thread is not None and self.seat.held:
            self._final_seen.wait(FINAL_STATE_WAIT_S)
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def open_in_browser(self) -> bool:
        """Open the page in this machine's browser when there is a desktop to show it on."""
        import os
        import webbrowser

        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            return False  # headless (a robot PC over SSH, CI): a text browser must not take the terminal
        return webbrowser.open(self.url)

    def __enter__(self) -> ConsoleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, action: str, **fields: Any) -> None:
        self.events = [*self.events, {"time": time.strftime("%H:%M:%S"), "action": action, **fields}][-200:]
        if self.protocol is None:
            return
        if action == "page_closed":
            waiting = self.protocol.request
            self.protocol.note("console: the operator page was closed" + (
                f"; trial {waiting.trial_id} still waits: reopen {self.url} or answer here" if waiting else ""),
                tell=True)
        elif action in ("stop", "instruct", "take_over"):
            self.protocol.note(f"console: {action} " + " ".join(f"{k}={v}" for k, v in fields.items()),
                               tell=action != "instruct")

    # ------------------------------------------------------------------ API bodies
    def state(self, token: str) -> dict[str, Any]:
        mine = self.seat.touch(token)
        batch = self.protocol.state() if self.protocol is not None else None
        if batch is not None and batch.get("closed"):
            self._final_seen.set()
        return {"title": self.title, "operator": mine, "seat_held": self.seat.held, "views": self.link.views(),
                "task": self.link.task(), "batch": batch, "time": time.time(),
                "limits": {"instruction_chars": MAX_INSTRUCTION_CHARS}}

    def post(self, path: str, body: Mapping[str, Any], token: str) -> dict[str, Any]:
        if path == "/api/claim":
            force = bool(body.get("force", False))
            held_before = self.seat.held
            new = self.seat.claim(token, force=force)
            if force and held_before and new != token:
                self._record("take_over")
            return {"token": new}
        if path == "/api/release":
            if self.seat.release(token):
                self._record("page_closed")
            return {"released": True}
        if path == "/api/stop":  # safety first: any page may stop the arm, seat or not
            result = self.link.stop()
            self._record("stop", ok=result.get("ok"))
            return result
        self.seat.require(token)
        if path == "/api/instruct":
            instruction = body.get("instruction")
            if not isinstance(instruction, str) or not instruction.strip():
                raise _RefusedError(HTTPStatus.BAD_REQUEST, "empty_instruction", "type an instruction first")
            if len(instruction.strip()) > MAX_INSTRUCTION_CHARS:  # the planner's limit (vlm.prompts.check_instruction)
                raise _RefusedError(HTTPStatus.BAD_REQUEST, "instruction_too_long",
                               f"an instruction has at most {MAX_INSTRUCTION_CHARS} characters, "
                               f"got {len(instruction.strip())}")
            if self.protocol is not None and self.protocol.phase == "running":
                raise _RefusedError(HTTPStatus.CONFLICT, "trial_running",
                               f"trial {self.protocol.trial_id} is running; the batch gives its instruction")
            result = self.link.instruct(instruction.strip(), bool(body.get("dry_run", False)))
            self._record("instruct", accepted=result.get("accepted"), task_id=result.get("task_id", ""))
            return result
        if path in ("/api/scene_ready", "/api/judge"):
            if self.protocol is None:
                raise _RefusedError(HTTPStatus.CONFLICT, "no_batch", "no trial batch is running in this console")
            trial_id = body.get("trial_id")
            if not isinstance(trial_id, str) or not trial_id:
                raise _RefusedError(HTTPStatus.BAD_REQUEST, "bad_request", "trial_id is missing")
            try:
                if path == "/api/scene_ready":
                    self.protocol.scene_ready(trial_id, "console")
                    self._record("scene_ready", trial_id=trial_id)
                    return {"ok": True, "message": f"{trial_id}: scene ready"}
                answer = {k: body[k] for k in ("success", "reason", "note", "subgoals")
                          if body.get(k) not in (None, "")}
                judgement = self.protocol.judge(trial_id, answer, "console")
            except (OperatorError, JudgementError) as error:
                raise _RefusedError(HTTPStatus.CONFLICT if isinstance(error, OperatorError) else HTTPStatus.BAD_REQUEST,
                               error.code, str(error)) from None
            self._record("judge", trial_id=trial_id, verdict=judgement.describe())
            return {"ok": True, "message": f"{trial_id}: {judgement.describe()}", "judgement": judgement.as_dict()}
        raise _RefusedError(HTTPStatus.NOT_FOUND, "not_found", f"no API {path!r}")

    def reference_png(self) -> bytes | None:
        request = self.protocol.request if self.protocol is not None else None
        if isinstance(request, SceneRequest) and request.reference_image is not None:
            path = Path(request.reference_image)
            return path.read_bytes() if path.is_file() else None
        return None


class _Handler(BaseHTTPRequestHandler):
    console: ConsoleServer
    server_version = "robopin-console"

    def log_message(self, format: str, *args: Any) -> None:
        del format, args  # the page polls several times a second: no access log on the terminal

    def _token(self) -> str:
        return self.headers.get("X-Operator-Token", "")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: HTTPStatus, data: Mapping[str, Any]) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            from robopin.trials.console_page import PAGE

            self._send(HTTPStatus.OK, PAGE.replace("{{TITLE}}", self.console.title).encode("utf-8"),
                       "text/html; charset=utf-8")
        elif path == "/api/state":
            self._json(HTTPStatus.OK, self.console.state(self._token()))
        elif path.startswith("/api/view/") and path.endswith(".png"):
            parts = path[len("/api/view/"):-len(".png")].split("/")
            data = self.console.link.png(parts[0], parts[1]) if len(parts) == 2 else None
            if data is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": "no_view", "message": f"no image for {path!r} yet"})
            else:
                self._send(HTTPStatus.OK, data, "image/png")
        elif path == "/api/reference.png":
            data = self.console.reference_png()
            if data is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": "no_reference", "message": "no reference picture now"})
            else:
                self._send(HTTPStatus.OK, data, "image/png")
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": "not_found", "message": f"nothing at {path!r}"})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            origin = self.headers.get("Origin")
            host = self.headers.get("Host", "")
            if origin and origin not in ("null",) and origin.split("://", 1)[-1] != host:
                # Only the console's own page may act: another site open in the browser must not move the arm
                raise _RefusedError(HTTPStatus.FORBIDDEN, "foreign_origin",
                                    f"requests from {origin!r} are not accepted")
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                raise _RefusedError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "request body too large")
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                raise _RefusedError(HTTPStatus.BAD_REQUEST, "bad_request", "the request body is not JSON") from None
            if not isinstance(body, dict):
                raise _RefusedError(HTTPStatus.BAD_REQUEST, "bad_request", "the request body must be a JSON object")
            token = self._token() or str(body.get("token", ""))
            self._json(HTTPStatus.OK, self.console.post(path, body, token))
        except _RefusedError as refusal:
            self._json(refusal.status, {"error": refusal.code, "message": refusal.message})
