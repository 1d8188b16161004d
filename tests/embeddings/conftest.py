"""Loopback stub servers (OpenAI and Gemini wire formats) and helpers for provider tests."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from memmw.embeddings.retry import RetryPolicy
from memmw.testing import fake_vector

#: (status, JSON payload or bytes) or (status, payload, extra headers)
Response = tuple[Any, ...]


@dataclass
class Recorded:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class StubServer:
    """A threaded HTTP server on 127.0.0.1 that hands every request to ``app``."""

    app: Callable[[Recorded], Response]
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""

    def start(self) -> None:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                rec = Recorded(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                stub.requests.append(rec)
                answer = stub.app(rec)
                status, payload = answer[0], answer[1]
                extra: dict[str, str] = answer[2] if len(answer) > 2 else {}  # type: ignore[misc]
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                # The client may have timed out and left (hang tests).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def paths(self, method: str | None = None) -> list[str]:
        return [r.path for r in self.requests if method is None or r.method == method]


def _error(status: int, message: str, code: str | None = None) -> Response:
    return status, {"error": {"message": message, "type": "stub_error", "code": code}}


class OpenAIStub:
    """Enough of the OpenAI API: /embeddings, /files, /batches (default dims 8)."""

    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self.failures: list[Response] = []  # served before successful embedding answers
        self.always_fail: Response | None = None
        self.batch_mode = "complete"  # complete | fail | never | unavailable
        self.polls_before_done = 1
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._polls: dict[str, int] = {}

    def vector(self, text: str, dims: int | None = None) -> list[float]:
        return fake_vector(text, dims or self.dims)

    def __call__(self, req: Recorded) -> Response:
        path = req.path.split("?", 1)[0]
        if req.method == "POST" and path.endswith("/embeddings"):
            return self._embeddings(req.json())
        if req.method == "POST" and path.endswith("/files"):
            return self._upload(req)
        if req.method == "POST" and path.endswith("/batches"):
            return self._create_batch(req.json())
        m = re.search(r"/batches/([^/]+)(/cancel)?$", path)
        if m:
            return self._batch(m.group(1), cancel=bool(m.group(2)))
        m = re.search(r"/files/([^/]+)/content$", path)
        if m:
            return 200, self.files[m.group(1)]
        return _error(404, f"no route {path}")

    def _embeddings(self, body: dict[str, Any]) -> Response:
        if self.always_fail is not None:
            return self.always_fail
        if self.failures:
            return self.failures.pop(0)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = body.get("dimensions") or self.dims
        data = []
        for i, text in enumerate(inputs):
            vec = self.vector(text, dims)
            emb: Any = vec
            if body.get("encoding_format") == "base64":
                emb = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        data.reverse()  # the client must order by index
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}

    def _upload(self, req: Recorded) -> Response:
        ctype = req.headers["content-type"]
        boundary = ctype.split("boundary=", 1)[1].strip('"').encode()
        content = b""
        for part in req.body.split(b"--" + boundary):
            if b'name="file"' in part:
                content = part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = content
        return 200, {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": 0,
            "filename": "input.jsonl",
            "purpose": "batch",
            "status": "processed",
        }

    def _create_batch(self, body: dict[str, Any]) -> Response:
        if self.batch_mode == "unavailable":
            return _error(404, "Batch API is not available for this endpoint")
        batch_id = f"batch_{len(self.batches) + 1}"
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": body["input_file_id"],
            "completion_window": body["completion_window"],
            "status": "validating",
            "created_at": 0,
        }
        self._polls[batch_id] = 0
        return 200, self.batches[batch_id]

    def _batch(self, batch_id: str, cancel: bool) -> Response:
        batch = self.batches[batch_id]
        if cancel:
            batch["status"] = "cancelled"
            return 200, batch
        self._polls[batch_id] += 1
        if self.batch_mode == "never" or self._polls[batch_id] <= self.polls_before_done:
            batch["status"] = "in_progress"
        elif self.batch_mode == "fail":
            batch["status"] = "failed"
            batch["errors"] = {"object": "list", "data": [{"message": "stub batch failure"}]}
        else:
            batch["status"] = "completed"
            batch["output_file_id"] = self._write_output(batch)
        return 200, batch

    def _write_output(self, batch: dict[str, Any]) -> str:
        out_id = f"{batch['id']}-out"
        if out_id not in self.files:
            lines = [json.loads(x) for x in self.files[batch["input_file_id"]].splitlines() if x]
            records = []
            for line in reversed(lines):  # output order is not guaranteed
                vec = self.vector(line["body"]["input"], line["body"].get("dimensions"))
                body = {"object": "list", "data": [{"index": 0, "embedding": vec}]}
                records.append(
                    json.dumps(
                        {
                            "id": f"req-{line['custom_id']}",
                            "custom_id": line["custom_id"],
                            "response": {"status_code": 200, "body": body},
                            "error": None,
                        }
                    )
                )
            self.files[out_id] = ("\n".join(records) + "\n").encode()
        return out_id


class GeminiStub:
    """Enough of the Gemini API: batchEmbedContents and asyncBatchEmbedContent + batches.get."""

    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self.failures: list[Response] = []
        self.batch_mode = "complete"  # complete | fail | never | unavailable
        self.polls_before_done = 1
        self.jobs: dict[str, dict[str, Any]] = {}

    def __call__(self, req: Recorded) -> Response:
        path = req.path.split("?", 1)[0]
        if req.method == "POST" and path.endswith(":batchEmbedContents"):
            if self.failures:
                return self.failures.pop(0)
            body = req.json()
            embeddings = [{"values": self._vec(r)} for r in body["requests"]]
            return 200, {"embeddings": embeddings}
        if req.method == "POST" and path.endswith(":asyncBatchEmbedContent"):
            if self.batch_mode == "unavailable":
                return 404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}
            body = req.json()
            name = f"batches/job{len(self.jobs) + 1}"
            requests = body["batch"]["inputConfig"]["requests"]["requests"]
            self.jobs[name] = {"requests": requests, "polls": 0}
            return 200, {"name": name, "metadata": {"name": name, "state": "BATCH_STATE_PENDING"}}
        m = re.search(r"/(batches/[^/:]+)(:cancel)?$", path)
        if m:
            return self._job(m.group(1), cancel=bool(m.group(2)))
        return 404, {"error": {"code": 404, "message": f"no route {path}", "status": "NOT_FOUND"}}

    def _vec(self, request: dict[str, Any]) -> list[float]:
        text = request["content"]["parts"][0]["text"]
        return fake_vector(text, request.get("outputDimensionality") or self.dims)

    def _job(self, name: str, cancel: bool) -> Response:
        job = self.jobs[name]
        if cancel:
            return 200, {}
        job["polls"] += 1
        meta: dict[str, Any] = {"name": name}
        if self.batch_mode == "never" or job["polls"] <= self.polls_before_done:
            meta["state"] = "BATCH_STATE_RUNNING"
        elif self.batch_mode == "fail":
            meta["state"] = "BATCH_STATE_FAILED"
        else:
            meta["state"] = "BATCH_STATE_SUCCEEDED"
            responses = [
                {"response": {"embedding": {"values": self._vec(r["request"])}}}
                for r in job["requests"]
            ]
            meta["output"] = {"inlinedEmbedContentResponses": {"inlinedResponses": responses}}
        return 200, {"name": name, "metadata": meta, "done": meta["state"] != "BATCH_STATE_RUNNING"}


@pytest.fixture
def openai_stub() -> Iterator[tuple[StubServer, OpenAIStub]]:
    app = OpenAIStub()
    server = StubServer(app)
    server.start()
    try:
        yield server, app
    finally:
        server.stop()


@pytest.fixture
def gemini_stub() -> Iterator[tuple[StubServer, GeminiStub]]:
    app = GeminiStub()
    server = StubServer(app)
    server.start()
    try:
        yield server, app
    finally:
        server.stop()


@pytest.fixture
def sleeps() -> list[float]:
    """Collects the delays a RetryPolicy asked for (no real sleeping)."""
    return []


@pytest.fixture
def fast_retry(sleeps: list[float]) -> RetryPolicy:
    """A retry policy that records delays instead of sleeping (jitter fixed at its maximum)."""
    return RetryPolicy(sleep=sleeps.append, rng=lambda: 0.999999)


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start without any provider keys from the host environment."""
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Close llama-cpp-python's module-level /dev/null handles (a ResourceWarning at exit)."""
    utils = sys.modules.get("llama_cpp._utils")
    for name in ("outnull_file", "errnull_file"):
        handle = getattr(utils, name, None)
        if handle is not None and not handle.closed:
            handle.close()


@pytest.fixture()
def hanging_url() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # the kernel completes handshakes; nobody ever reads or replies
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()
