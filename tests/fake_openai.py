"""A fault-injecting OpenAI-compatible server on loopback, for tests.

No real endpoint can be told to fail on cue, so this one serves `/v1/models` and
`/v1/chat/completions` (streaming or not) in a chosen mode:

- `ok`: answers at once; `slow`: the same answer, `token_delay` seconds per token;
- `hang`: accepts the request and never answers;
- `stall`: streams `cut_after` tokens, then sends nothing more (the connection stays open);
- `500` / `429`: fails with that status (429 with `retry_after` as its Retry-After, if set);
- `cut`: streams `cut_after` tokens, then ends the response without a finish_reason or
  `[DONE]` (the connection closes cleanly, as a proxy timing out would);
- `reset`: streams `cut_after` tokens, then drops the connection mid chunked body.

The answer is built from the prompt, the way a faithful model would answer: the first
sentence of source [1], cited [1]. A condense-question prompt gets the follow-up back with
the conversation's first question appended, so a test can see which history it was given.
`requests` counts chat-completion requests, so retries can be counted.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "slow", "hang", "stall", "500", "429", "cut", "reset")
_SOURCE_1 = re.compile(r'\[1\] [^\n]*\n"""\n(.+?)\n"""', re.S)
_FOLLOW_UP = re.compile(r"<Follow Up Message>\n(.+?)\n", re.S)
_FIRST_HUMAN = re.compile(r"Human: (.+)")


def reply_for(prompt: str) -> str:
    """What the fake model answers to a prompt."""
    follow_up = _FOLLOW_UP.search(prompt)
    if follow_up:
        first = _FIRST_HUMAN.search(prompt)
        about = f" (about: {first.group(1).strip()})" if first else ""
        return follow_up.group(1).strip() + about
    source = _SOURCE_1.search(prompt)
    if not source:
        return "NOT IN SOURCES"
    first_sentence = re.split(r"(?<=[.!?])\s+", source.group(1).strip())[0].rstrip(".!? ")
    return f"{first_sentence} [1]."


class FakeOpenAI:
    """The server; use as a context manager, change `mode` at any time."""

    def __init__(
        self,
        mode: str = "ok",
        token_delay: float = 0.05,
        cut_after: int = 3,
        retry_after: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode = mode
        self.token_delay = token_delay
        self.cut_after = cut_after
        self.retry_after = retry_after
        self.requests = 0
        self.readings = 0  # of the requests, those for first-token log-probabilities
        self.prompts: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # releases hung requests
        self._server.shutdown()
        self._server.server_close()

    def _count(self, prompt: str, reading: bool = False) -> None:
        with self._lock:
            self.requests += 1
            self.readings += reading
            self.prompts.append(prompt)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _json(self, status: int, body: dict[str, Any], **headers: str) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, {"error": {"message": "not found"}})
                    return
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = "\n".join(str(m.get("content", "")) for m in request["messages"])
                fake._count(prompt, bool(request.get("logprobs")))
                mode = fake.mode
                if mode == "hang":
                    fake._stop.wait()
                    return
                if mode == "500":
                    self._json(500, {"error": {"message": "internal error", "type": "server"}})
                    return
                if mode == "429":
                    headers = {"Retry-After": fake.retry_after} if fake.retry_after else {}
                    self._json(429, {"error": {"message": "rate limited"}}, **headers)
                    return
                words = reply_for(prompt).split(" ")
                tokens = [w + " " for w in words[:-1]] + words[-1:]
                if not request.get("stream"):
                    self._json(200, _completion(request, "".join(tokens)))
                    return
                self._stream(request, tokens, mode)

            def _stream(self, request: dict[str, Any], tokens: list[str], mode: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                if mode == "cut":
                    # No length and no chunking: the body ends where the connection does.
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def send(event: str) -> None:
                    data = f"data: {event}\n\n".encode()
                    if mode == "cut":
                        self.wfile.write(data)
                    else:
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()

                for i, token in enumerate(tokens):
                    if mode == "stall" and i == fake.cut_after:
                        fake._stop.wait()
                        return
                    if mode in ("cut", "reset") and i == fake.cut_after:
                        if mode == "reset":
                            self.close_connection = True
                            self.connection.shutdown(2)  # mid chunked body: a protocol error
                        return
                    if mode == "slow":
                        time.sleep(fake.token_delay)
                    send(json.dumps(_chunk(request, {"content": token}, None)))
                send(json.dumps(_chunk(request, {}, "stop")))
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that give up (a timeout) or connections dropped on purpose (`reset`) are
        # what the tests provoke, not errors of the server.
        return None


def _chunk(request: dict[str, Any], delta: dict[str, str], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _completion(request: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                # Asked for them, the reply's first word at probability 1: no Yes, no No.
                "logprobs": {
                    "content": [
                        {
                            "token": text.split(" ")[0],
                            "logprob": 0.0,
                            "bytes": None,
                            "top_logprobs": [
                                {"token": text.split(" ")[0], "logprob": 0.0, "bytes": None}
                            ],
                        }
                    ]
                }
                if request.get("logprobs")
                else None,
            }
        ],
    }
