"""kbv.client against a scripted HTTP server (no kbv): the retries on 503 and 429 after their
Retry-After, a refused connection retried until the service listens, the per-exchange timeout and
the call's deadline, refusals raised at once, a batch's refused requests as failed jobs, and a
source's lone surrogates replaced rather than failing the request."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kbv.client import Client, KbvError


class Scripted:
    """A loopback HTTP server answering each request with the next of `answers`: (status, body,
    headers), or a number of seconds to stay silent. Requests are kept in `received`."""

    def __init__(self, answers: list, port: int = 0):
        self.answers = list(answers)
        self.received: list[tuple[str, str, object]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                scripted.received.append((self.command, self.path, json.loads(raw or b"null")))
                answer = scripted.answers.pop(0) if scripted.answers else (500, {}, {})
                if isinstance(answer, (int, float)):
                    time.sleep(answer)
                    return
                status, body, headers = answer
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    servers = []

    def make(answers, port=0):
        servers.append(Scripted(answers, port))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_503_and_429_are_retried_after_their_retry_after(scripted):
    server = scripted(
        [
            (503, {"error": "draining"}, {"Retry-After": "0"}),
            (429, {"error": "the queue is full"}, {"Retry-After": "0"}),
            (202, {"id": "abc", "status": "queued"}, {}),
        ]
    )
    client = Client(server.url, "token")
    assert client.submit("problem", "candidate") == "abc"
    assert client.retries == 2
    assert [r[1] for r in server.received] == ["/v1/evaluations"] * 3
    assert server.received[-1][2] == {"problem": "problem", "candidate": "candidate"}


def test_a_refused_connection_is_retried_until_the_service_listens(scripted):
    port = free_port()
    threading.Timer(
        1.0, lambda: scripted([(202, {"id": "late", "status": "queued"}, {})], port)
    ).start()
    client = Client(f"http://127.0.0.1:{port}", "token", max_retry_wait=0.2, deadline=30)
    assert client.submit("p", "c") == "late"
    assert client.retries >= 1


def test_an_exchange_without_an_answer_times_out(scripted):
    server = scripted([5])  # silent for 5 s
    client = Client(server.url, "token", timeout=0.5)
    started = time.monotonic()
    with pytest.raises(KbvError, match="no answer in time"):
        client.submit("p", "c")
    assert time.monotonic() - started < 3


def test_retries_stop_at_the_calls_deadline(scripted):
    server = scripted([(429, {"error": "full"}, {"Retry-After": "1"})] * 20)
    client = Client(server.url, "token", deadline=1.5)
    started = time.monotonic()
    with pytest.raises(KbvError, match="deadline"):
        client.submit("p", "c")
    assert 1.0 <= time.monotonic() - started < 4


def test_refusals_raise_at_once_with_their_status(scripted):
    server = scripted([(413, {"error": "send at most 2 at a time"}, {})])
    client = Client(server.url, "token")
    with pytest.raises(KbvError, match="send at most 2") as error:
        client.batch([{"problem": "p", "candidate": "c"}] * 3)
    assert error.value.status == 413 and client.retries == 0
    assert len(server.received) == 1


def test_a_failed_job_of_the_services_fault_is_returned_with_its_failure(scripted):
    job = {"id": "j", "status": "failed", "failure": "service", "error": "disk full"}
    server = scripted([(500, job, {})])
    assert Client(server.url, "token").evaluate("p", "c") == job


def test_a_batchs_refused_requests_come_back_as_failed_jobs(scripted):
    done = {"id": "a", "status": "done", "result": {"verdict": "correct"}, "reward": {}}
    server = scripted(
        [
            (202, {"ids": ["a", None], "refused": [{"index": 1, "error": "a NUL byte"}]}, {}),
            (200, done, {}),
        ]
    )
    jobs = Client(server.url, "token").batch(
        [{"problem": "p", "candidate": "c"}, {"problem": "p", "candidate": "c\x00"}]
    )
    assert jobs[0] == done
    assert jobs[1]["id"] is None and jobs[1]["status"] == "failed"
    assert jobs[1]["failure"] == "request" and jobs[1]["error"] == "a NUL byte"
    assert [r[1] for r in server.received] == ["/v1/batches", "/v1/evaluations/a"]


def test_a_lone_surrogate_is_replaced_not_sent(scripted):
    server = scripted([(202, {"id": "s", "status": "queued"}, {})])
    Client(server.url, "token").submit("p", "x = 1  # \udcff\n")
    assert server.received[0][2]["candidate"] == "x = 1  # ?\n"
