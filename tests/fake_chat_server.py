"""A local stand-in for a paid chat-completions API (the one place a fake is acceptable).

A real HTTP server (http.server, a thread, 127.0.0.1, a free port) that speaks the
OpenAI-compatible protocol: ``POST /v1/chat/completions`` with a JSON request,
``{"model": ..., "choices": [{"message": {"content": ...}, "finish_reason": ...}]}`` back.
Each test scripts its answers (in order, or from a function of the request) and reads the
requests it received.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    """time.monotonic() when the request arrived."""

    @property
    def messages(self) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = self.body["messages"]
        return messages

    @property
    def prompt_chars(self) -> int:
        return sum(len(m["content"]) for m in self.messages)

    @property
    def segments(self) -> list[dict[str, str]]:
        """The segments of the user message (its JSON array)."""
        user = self.messages[-1]["content"]
        segments: list[dict[str, str]] = json.loads(user[user.index("[") :])
        return segments


def completion(content: str | None, *, model: str = "fake", finish_reason: str = "stop") -> Answer:
    """A 200 chat completion whose message content is ``content``."""
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
    }
    return Answer(body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def json_completion(document: Any) -> Answer:
    return completion(json.dumps(document))


def status(code: int, *, body: Any = None, headers: dict[str, str] | None = None) -> Answer:
    data = b"" if body is None else json.dumps(body).encode()
    return Answer(status=code, body=data, headers=headers or {})


class FakeChatServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self._script: deque[Answer] = deque()
        self.responder: Callable[[Received], Answer] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *answers: Answer) -> None:
        """Answer the next requests with ``answers``, in order (then with ``responder``)."""
        with self._lock:
            self._script.extend(answers)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # releases slow answers
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, request: Received) -> Answer:
        with self._lock:
            self.received.append(request)
            if self._script:
                return self._script.popleft()
        if self.responder is None:
            raise AssertionError(f"request #{len(self.received)} was not scripted")
        return self.responder(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                request = Received(self.path, dict(self.headers.items()), body, time.monotonic())
                try:
                    answer = server._answer(request)
                except AssertionError as error:
                    answer = Answer(status=599, body=str(error).encode())
                if answer.delay_s and server._stopping.wait(answer.delay_s):
                    return
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: pytest shows what matters."""

        return Handler


@contextmanager
def running_fake_chat_server() -> Iterator[FakeChatServer]:
    server = FakeChatServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
