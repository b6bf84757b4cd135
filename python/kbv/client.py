"""A client for `kbv serve`, the reward service (docs/serve.md). Standard library only.

    from kbv.client import Client
    kbv = Client("http://127.0.0.1:8000", token)
    job = kbv.evaluate(problem_source, candidate_source, protocol="verified")
    job["reward"]["correct"], job["reward"]["speedup"]

Sources are text, or a pathlib.Path to read (a plain string is always the source itself).
Options are those of a request (protocol, draws,
profile, samples, rounds, no_timing, allow_library, size, timeout, compile_timeout,
problem_name, run). 429 (queue full) and 503 (draining) are retried after the Retry-After the
service sends, and so is a refused connection (the service restarting), until the call's
deadline; other errors raise KbvError. A finished job that failed says whose fault that was:
`failure` "request" (its problem cannot be evaluated) or "service" (kbv could not store its
result: submit it again later).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["Client", "KbvError"]

_FINISHED = ("done", "failed")


class KbvError(Exception):
    """An answer the client does not retry (400, 401, 404, 413, ...) or a deadline passed."""

    def __init__(self, message: str, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


def _source(value: str | os.PathLike[str]) -> str:
    text = Path(value).read_text() if isinstance(value, os.PathLike) else value
    # A lone surrogate (a model's broken output decoded with surrogateescape, say) has no UTF-8
    # form: JSON would carry it as an escape the service must refuse, failing the whole request
    # over a character no Python file could hold. As in a file written with errors="replace".
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", errors="replace").decode("utf-8")
    return text


class Client:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 60.0,
        deadline: float = 3600.0,
        max_retry_wait: float = 30.0,
        poll_interval: float = 0.5,
    ):
        """`timeout`: seconds for one HTTP exchange (evaluate()'s, which holds until the result,
        is bounded by the deadline instead); `deadline`: seconds one call (retries and waiting
        for results included) may take; `max_retry_wait`: the longest pause between
        retries, whatever Retry-After says; `poll_interval`: the first pause between polls of a
        result (it doubles up to 5 s)."""
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.deadline = deadline
        self.max_retry_wait = max_retry_wait
        self.poll_interval = poll_interval
        self.retries = 0  # 429/503/refused answers retried so far (for tests and logs)

    # -- HTTP ------------------------------------------------------------------------------
    def _once(self, method: str, path: str, body: Any, timeout: float) -> tuple[int, Any, dict]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return (
                    response.status,
                    json.loads(response.read() or b"null"),
                    dict(response.headers),
                )
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                payload = json.loads(raw) if raw else None
            except ValueError:
                payload = raw.decode(errors="replace")
            return error.code, payload, dict(error.headers or {})

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        until: float | None = None,
        timeout: float | None = None,
    ) -> tuple[int, Any]:
        until = until if until is not None else time.monotonic() + self.deadline
        while True:
            left = until - time.monotonic()
            if left <= 0:
                raise KbvError(f"{method} {path}: no answer within the deadline")
            try:
                status, payload, headers = self._once(
                    method, path, body, min(timeout or self.timeout, left)
                )
            except (ConnectionRefusedError, ConnectionResetError) as error:
                # Refused: the service is not listening (restarting); nothing was received.
                # Reset: it went away mid-exchange; a repeated submission is answered from its
                # store or evaluated again, never lost.
                status, payload, headers = None, str(error), {}
            except urllib.error.URLError as error:
                if not isinstance(error.reason, (ConnectionRefusedError, ConnectionResetError)):
                    raise KbvError(f"{method} {path}: {error.reason}") from error
                status, payload, headers = None, str(error.reason), {}
            except TimeoutError as error:
                raise KbvError(f"{method} {path}: no answer in time") from error
            if status in (429, 503) or status is None:
                self.retries += 1
                wait = _retry_after(headers, default=1.0)
                time.sleep(max(0.05, min(wait, self.max_retry_wait, until - time.monotonic())))
                continue
            if status >= 400:
                reason = payload.get("error") if isinstance(payload, dict) else payload
                raise KbvError(f"{method} {path}: HTTP {status}: {reason}", status, payload)
            return status, payload

    # -- the API -----------------------------------------------------------------------------
    def submit(
        self, problem: str | os.PathLike[str], candidate: str | os.PathLike[str], **options: Any
    ) -> str:
        """Queues one evaluation; returns its id."""
        _, payload = self._request("POST", "/v1/evaluations", _body(problem, candidate, options))
        return payload["id"]

    def result(self, job_id: str, *, wait: bool = True, deadline: float | None = None) -> dict:
        """The job: {id, status, result, reward, error}. With `wait`, polls until it is done or
        failed (or the deadline passes: KbvError)."""
        until = time.monotonic() + (deadline if deadline is not None else self.deadline)
        pause = self.poll_interval
        while True:
            _, job = self._request("GET", f"/v1/evaluations/{job_id}", until=until)
            if not wait or job["status"] in _FINISHED:
                return job
            if time.monotonic() + pause > until:
                raise KbvError(f"evaluation {job_id} not finished within the deadline", body=job)
            time.sleep(pause)
            pause = min(pause * 2, 5.0)

    def evaluate(
        self, problem: str | os.PathLike[str], candidate: str | os.PathLike[str], **options: Any
    ) -> dict:
        """Evaluates one candidate and returns the finished job (status done with its result
        and reward, or failed with the error and whose fault: `failure` "request" when the
        problem cannot be evaluated, "service" when kbv could not store the result)."""
        until = time.monotonic() + self.deadline
        try:
            _, job = self._request(
                "POST",
                "/v1/evaluations?wait=1",
                _body(problem, candidate, options),
                until=until,
                timeout=self.deadline,
            )
        except KbvError as error:
            # A failed job: 400 when its problem cannot be evaluated, 500 when kbv could not
            # store its result.
            if error.status in (400, 500) and isinstance(error.body, dict) and "id" in error.body:
                return error.body
            raise
        if job.get("status") in _FINISHED:
            return job
        return self.result(job["id"], deadline=max(0.0, until - time.monotonic()))

    def batch(self, requests: list[dict], *, wait: bool = True) -> list:
        """Queues a list of requests ({"problem", "candidate", options...}, sources as text or
        paths) at once; returns their ids, or with `wait` their finished jobs, in the same order.
        A request the service refuses alone (malformed: a NUL byte, over the size limit) has
        the id None, and with `wait` a failed job {"id": None, "status": "failed", "failure":
        "request", "error": <why>}; the others are evaluated. A batch refused whole (queue
        full past the deadline, more than the queue holds, every request malformed) raises."""
        until = time.monotonic() + self.deadline
        items = []
        for r in requests:
            options = {k: v for k, v in r.items() if k not in ("problem", "candidate")}
            items.append(_body(r["problem"], r["candidate"], options))
        _, payload = self._request("POST", "/v1/batches", {"evaluations": items}, until=until)
        ids = payload["ids"]
        if not wait:
            return ids
        refused = {r["index"]: r["error"] for r in payload.get("refused", [])}
        return [
            self.result(job_id, deadline=max(0.0, until - time.monotonic()))
            if job_id is not None
            else _refused_job(refused.get(index, "refused by the service"))
            for index, job_id in enumerate(ids)
        ]

    def health(self) -> dict:
        status, payload, _ = self._once("GET", "/v1/health", None, self.timeout)
        if status not in (200, 503):
            raise KbvError(f"GET /v1/health: HTTP {status}", status, payload)
        return payload


def _refused_job(why: str) -> dict:
    return {
        "id": None,
        "status": "failed",
        "failure": "request",
        "error": why,
        "from_store": False,
        "result": None,
        "reward": None,
    }


def _body(problem, candidate, options: dict) -> dict:
    return {"problem": _source(problem), "candidate": _source(candidate), **options}


def _retry_after(headers: dict, default: float) -> float:
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0.0, float(value))
            except ValueError:
                return default
    return default
