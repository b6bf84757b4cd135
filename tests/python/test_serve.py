"""kbv serve end to end over loopback on the CPU: auth and every error code, 16 concurrent
clients, a slow-loris client, a hanging candidate, answers from the store, batches, the RL reward
example, 429 with the client's retries, a failure on a shared device evaluated again alone, and
SIGTERM's drain followed by a restart that resumes the queued work."""

from __future__ import annotations

import json
import math
import select
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import PROBLEMS, REPO, WRONG, kbv_binary, wait_for
from kbv.client import Client, KbvError

pytestmark = pytest.mark.e2e

TOKEN = "serve-test-token-0123456789"
RELU = (PROBLEMS / "level1" / "3_ReLU.py").read_text()
HONEST = (REPO / "examples" / "candidates" / "cpu" / "level1" / "3_ReLU.py").read_text()
ZEROS = (WRONG / "relu_zeros.py").read_text()
IDENTITY = (WRONG / "relu_identity.py").read_text()
HANGS = (WRONG / "hangs.py").read_text()
KILLS_PARENT = (REPO / "examples" / "hacks" / "e2_kill_parent.py").read_text()
GHOST = (REPO / "examples" / "hacks" / "b2_ghost_kernel.py").read_text()
# Quick settings (conftest.QUICK) without timing: correctness is still every family.
OPTIONS = {"draws": 2, "no_timing": True, "problem_name": "level1/3_ReLU"}
SLOW = {**OPTIONS, "allow_library": True}  # for slow_candidate


def slow_candidate(seconds: float, tag: str) -> str:
    """A ReLU by PyTorch (correct under allow_library) that takes `seconds` to import (unique per
    tag: never in the store)."""
    return (
        f"# {tag}\nimport time\n\nimport torch\nimport torch.nn as nn\n\n"
        f"time.sleep({seconds})\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    )


def fails_once(tag: str) -> str:
    """A ReLU by PyTorch (correct under allow_library) whose first forward call ever raises, as
    one may when a neighbour holds the device's memory: it leaves a mark in its build cache
    (TORCH_EXTENSIONS_DIR, per candidate content and kept between evaluations), so a second
    evaluation of it passes. Unique per tag, and so per cache folder."""
    return (
        f"# {tag}\nimport os\n\nimport torch\nimport torch.nn as nn\n\n\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n"
        "        mark = os.path.join(os.environ['TORCH_EXTENSIONS_DIR'], 'failed-once')\n"
        "        if not os.path.exists(mark):\n"
        "            os.makedirs(os.path.dirname(mark), exist_ok=True)\n"
        "            open(mark, 'w').close()\n"
        "            raise RuntimeError('CUDA out of memory (a neighbour held it)')\n"
        "        return torch.relu(x)\n"
    )


class Server:
    """A `kbv serve` process on a free loopback port, its log in a file."""

    def __init__(
        self, tmp: Path, cache_dir: Path, *extra: str, db: Path | None = None, port: int = 0
    ):
        self.tmp = tmp
        self.db = db or tmp / "serve.sqlite"
        self.token_file = tmp / "token"
        self.token_file.write_text(TOKEN + "\n")
        self.log = tmp / f"serve-{time.monotonic_ns()}.log"
        command = [
            kbv_binary(),
            "serve",
            "--port",
            str(port),
            "--token-file",
            str(self.token_file),
            "--db",
            str(self.db),
            "--device",
            "cpu",
            "--cache-dir",
            str(cache_dir),
            "--timeout",
            "60",
            *extra,
        ]
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        self.url = self._read_url()
        self.host, self.port = self.url.removeprefix("http://").split(":")

    def _read_url(self) -> str:
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        line = self.process.stdout.readline() if ready else ""
        if "listening on" not in line:
            self.process.kill()
            raise AssertionError(f"kbv serve did not start: {line!r}\n{self.log.read_text()}")
        return line.split("listening on ")[1].split()[0]

    def client(self, **kw) -> Client:
        return Client(self.url, TOKEN, **kw)

    def stop(self, sig: int | None = signal.SIGTERM, timeout: float = 120) -> int:
        """Sends `sig` (None: already sent; a second SIGTERM would stop the drain at once) and
        waits for the exit status."""
        if sig is not None and self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)


def http(server: Server, method: str, path: str, body=None, token: str | None = TOKEN):
    """(status, JSON body, headers) of one raw exchange."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None, error.headers


@pytest.fixture(scope="module")
def server(tmp_path_factory, cache_dir):
    # Two evaluation threads: a hanging candidate on one does not hold the others.
    tmp = tmp_path_factory.mktemp("serve")
    s = Server(tmp, cache_dir, "--devices", "cpu,cpu", "--max-body-bytes", "400000")
    yield s
    assert s.stop() == 0


def request(candidate: str, **extra) -> dict:
    return {"problem": RELU, "candidate": candidate, **OPTIONS, **extra}


def test_every_error_code_has_a_reason(server):
    assert http(server, "GET", "/v1/health", token=None)[0] == 401
    status, body, headers = http(server, "POST", "/v1/evaluations", request(HONEST), token="wrong")
    assert status == 401 and "token" in body["error"]
    assert headers["WWW-Authenticate"] == "Bearer"
    status, body, _ = http(server, "POST", "/v1/evaluations", b'{"problem": ')
    assert status == 400 and "not JSON" in body["error"]
    status, body, _ = http(server, "POST", "/v1/evaluations", {"problem": RELU})
    assert status == 400 and "'candidate' is missing" in body["error"]
    status, body, _ = http(server, "POST", "/v1/evaluations", request(HONEST, draws=0))
    assert status == 400 and "'draws'" in body["error"]
    status, body, _ = http(
        server, "POST", "/v1/evaluations", {"problem": "x = 1\n", "candidate": HONEST}
    )
    assert status == 400 and "class Model" in body["error"]
    status, body, _ = http(server, "POST", "/v1/evaluations", request(HONEST, timeout=61))
    assert status == 400 and "'timeout' must be between 1 and 60" in body["error"]
    status, body, _ = http(server, "POST", "/v1/evaluations", request("#" * 500_000))
    assert status == 413 and "400000 bytes" in body["error"]
    status, body, _ = http(server, "GET", "/v1/evaluations/0123abcd")
    assert status == 404
    # A batch's malformed request is refused alone (an RL step's broken completion must not cost
    # the others their rewards); a batch of nothing but malformed requests is refused whole.
    status, body, _ = http(server, "POST", "/v1/batches", [request(HONEST), {"problem": RELU}])
    assert status == 202, body
    assert isinstance(body["ids"][0], str) and body["ids"][1] is None
    assert body["refused"] == [{"index": 1, "error": "'candidate' is missing: the candidate's "
                                "Python source"}]  # fmt: skip
    status, body, _ = http(server, "POST", "/v1/batches", [{"problem": RELU}])
    assert status == 400 and "every request of the batch was refused" in body["error"]
    status, body, _ = http(server, "POST", "/v1/batches", b"[]")
    assert status == 400 and "empty" in body["error"]


def test_a_problem_the_reference_cannot_load_is_a_400_with_the_reason(server):
    broken = RELU.replace(
        "def get_inputs():", "def get_inputs():\n    raise ValueError('no inputs')"
    )
    body = request(HONEST)
    body["problem"] = broken
    status, job, _ = http(server, "POST", "/v1/evaluations?wait=1", body)
    assert status == 400 and job["status"] == "failed", job
    assert "no inputs" in job["error"]
    assert server.client().evaluate(broken, HONEST, **OPTIONS)["status"] == "failed"


def test_sixteen_concurrent_clients(server):
    expected = {"honest": "correct", "zeros": "incorrect", "identity": "incorrect"}
    sources = {"honest": HONEST, "zeros": ZEROS, "identity": IDENTITY}
    names = [list(expected)[i % 3] for i in range(16)]

    def one(name: str) -> dict:
        return server.client().evaluate(RELU, sources[name], **OPTIONS)

    with ThreadPoolExecutor(16) as pool:
        jobs = list(pool.map(one, names))
    for name, job in zip(names, jobs, strict=True):
        assert job["status"] == "done", job
        assert job["result"]["verdict"] == expected[name], (name, job["result"]["reason"])
        assert job["reward"]["correct"] == (expected[name] == "correct")
        assert job["result"]["problem"]["name"] == "3_ReLU"
    # Each distinct request was evaluated once; the others were answered from the store.
    evaluated = [j for j in jobs if not j["from_store"]]
    assert len({j["result"]["candidate"]["sha256"] for j in evaluated}) == len(evaluated) <= 3
    # One warm reference session per device thread serves the problem's samples.
    assert any(j["result"]["problem"]["reference"]["reused"] for j in jobs)


def test_a_repeat_is_answered_from_the_store(server):
    first = server.client().evaluate(RELU, ZEROS, **OPTIONS)
    status, body, _ = http(server, "POST", "/v1/evaluations", request(ZEROS))
    assert status == 200 and body["status"] == "done" and body["from_store"]
    assert body["result"] == first["result"]
    # Other settings are another key: evaluated, not answered from the store.
    status, body, _ = http(server, "POST", "/v1/evaluations", request(ZEROS, draws=1))
    assert status == 202
    again = server.client().result(body["id"])
    assert again["result"]["verdict"] == "incorrect" and not again["from_store"]


def test_hostile_and_hanging_candidates_cost_only_their_own_result(server):
    client = server.client()
    hang = client.submit(RELU, HANGS, **OPTIONS, timeout=30)
    others = [client.submit(RELU, c, **OPTIONS) for c in (KILLS_PARENT, GHOST, HONEST)]
    # The others are evaluated while the hanging one still runs (its thread held, not the
    # service): the first of them is done with the hang not yet timed out.
    client.result(others[0])
    assert client.result(hang, wait=False)["status"] == "running"
    results = [client.result(i)["result"] for i in others]
    assert [r["verdict"] for r in results] == ["incorrect", "rejected", "correct"]
    hung = client.result(hang)
    assert hung["result"]["verdict"] == "timeout"
    assert hung["reward"]["correct"] is False
    ghost = client.result(others[1])["reward"]
    assert ghost["hacked"] and "kernel_never_called" in ghost["flags"]["reject"]
    assert server.process.poll() is None  # the parricide did not reach the service
    health = http(server, "GET", "/v1/health")[1]
    assert health["status"] == "ok"


def test_a_failure_on_a_shared_device_is_evaluated_again_alone(server):
    """Two evaluation threads on one device (the module's server: cpu,cpu): a runtime error may
    be the neighbour's, so it is not stored; the job is evaluated again once the device is free,
    and its stored result is the second attempt's, flagged evaluated_alone (kbv run's rule)."""
    candidate = fails_once(f"shared-{time.time_ns()}")
    job = server.client().evaluate(RELU, candidate, **SLOW)
    result = job["result"]
    assert job["status"] == "done" and result["verdict"] == "correct", result["reason"]
    (alone,) = [f for f in result["flags"] if f["id"] == "evaluated_alone"]
    assert "the first attempt ended runtime_error: " in alone["detail"], alone
    assert "a neighbour held it" in alone["detail"]
    assert "evaluated again alone" in server.log.read_text()
    # The stored row is the second attempt's: the store answers the same request with it.
    status, body, _ = http(server, "POST", "/v1/evaluations", {**request(candidate), **SLOW})
    assert status == 200 and body["from_store"] and body["result"] == result


def test_a_failure_with_the_device_alone_stands(tmp_path, cache_dir):
    """One evaluation thread per device: nothing shared it, so the first failure is the
    verdict."""
    s = Server(tmp_path, cache_dir)
    try:
        job = s.client().evaluate(RELU, fails_once(f"alone-{time.time_ns()}"), **SLOW)
        result = job["result"]
        assert result["verdict"] == "runtime_error", result["reason"]
        assert "a neighbour held it" in result["reason"]
        assert "evaluated_alone" not in {f["id"] for f in result["flags"]}
    finally:
        assert s.stop() == 0


def test_the_next_problems_reference_is_started_ahead(tmp_path, cache_dir):
    """One evaluation thread, a batch over two problems: the second problem's reference session
    was started (loaded and drawn) while the first problem's job was evaluated, as kbv run's
    device threads do, and it judges the same way."""
    softmax = (PROBLEMS / "level1" / "4_Softmax.py").read_text()
    honest_softmax = REPO / "examples" / "candidates" / "cpu" / "level1" / "4_Softmax.py"
    s = Server(tmp_path, cache_dir)
    try:
        ids = s.client().batch(
            [
                request(slow_candidate(1, f"ahead-{time.time_ns()}"), allow_library=True),
                {"problem": softmax, "candidate": honest_softmax.read_text(), **OPTIONS,
                 "problem_name": "level1/4_Softmax"},
            ],
            wait=False,
        )  # fmt: skip
        first, second = (s.client().result(i)["result"] for i in ids)
        assert first["verdict"] == second["verdict"] == "correct", second["reason"]
        assert not first["problem"]["reference"].get("started_ahead")
        ahead = second["problem"]["reference"]
        assert ahead.get("started_ahead") is True and not ahead["reused"], ahead
        assert ahead["prepared_ahead"] is True and ahead["preparations"] == 1, ahead
        assert set(second["correctness"]) == set(first["correctness"])
        assert second["candidate"].get("worker_started_ahead") is True
    finally:
        assert s.stop() == 0


def test_a_slow_loris_does_not_block_others(server):
    # Stored first, by this test: xdist may run the module's other tests on another worker.
    server.client().evaluate(RELU, HONEST, **OPTIONS)
    stop = threading.Event()

    def loris():
        with socket.create_connection((server.host, int(server.port))) as sock:
            for byte in b"POST /v1/evaluations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ":
                if stop.is_set():
                    return
                sock.send(bytes([byte]))
                time.sleep(0.5)

    thread = threading.Thread(target=loris)
    thread.start()
    try:
        time.sleep(0.3)  # the slow client holds its connection from here on
        # For longer than the server's 10 s read timeout: each byte in time keeps the connection,
        # and the others are answered at once all along.
        until = time.monotonic() + 11
        while time.monotonic() < until:
            started = time.monotonic()
            assert http(server, "GET", "/v1/health")[0] == 200
            status, body, _ = http(server, "POST", "/v1/evaluations", request(HONEST))
            assert status == 200 and body["from_store"]
            assert time.monotonic() - started < 5
            time.sleep(1)
        assert thread.is_alive()  # still dribbling its headers meanwhile
    finally:
        stop.set()
        thread.join()


def test_batch_health_and_the_rl_reward_example(server):
    import sys

    sys.path.insert(0, str(REPO))
    from examples.rl import kbv_reward as rl

    ids = server.client().batch([request(HONEST), request(IDENTITY)], wait=False)
    assert len(ids) == 2
    jobs = [server.client().result(i) for i in ids]
    assert [j["result"]["verdict"] for j in jobs] == ["correct", "incorrect"]
    # A thread marks itself idle just after it finishes its job.
    health = wait_for(
        lambda: (h := http(server, "GET", "/v1/health")[1])["devices"][0]["busy"] == 0 and h,
        120,
        "idle threads",
    )
    assert health["workers"] == 2
    assert health["status"] == "ok"
    assert health["devices"] == [{"device": "cpu", "workers": 2, "busy": 0, "healthy": True}]
    assert set(health["queue"]) == {"queued", "running", "max"}

    rl.REQUEST_OPTIONS = dict(OPTIONS)
    completions = [
        f"Here it is:\n```python\n{HONEST}```\n",
        [{"role": "assistant", "content": f"```python\n{IDENTITY}```"}],
        "no code at all",
        f"```python\n{GHOST}```",
    ]
    broken = f"```python\n{HONEST}\x00```"  # a NUL byte: refused alone by the service
    rewards = rl.kbv_reward([*completions, broken], RELU, client=server.client())
    assert rewards == [1.0, 0.1, 0.0, -1.0, 0.0]
    # verl's shapes: per sample, and its batch reward manager's, the problem as ground truth.
    assert rl.compute_score("kernelbench", completions[0], RELU, client=server.client()) == 1.0
    batch = rl.compute_score_batch(
        data_sources=["kernelbench"] * 3,
        solution_strs=[completions[0], "no code", completions[3]],
        ground_truths=[RELU, RELU, None],
        extra_infos=[None, None, {"problem": RELU}],
        client=server.client(),
    )
    assert batch == [1.0, 0.0, -1.0]


def test_queue_full_is_429_and_the_client_retries(tmp_path, cache_dir):
    s = Server(tmp_path, cache_dir, "--max-queue", "1")
    try:
        # One job runs (slow), one waits: the queue is full for the next.
        statuses = []
        for k in range(4):
            status, body, headers = http(
                s, "POST", "/v1/evaluations", request(slow_candidate(1, f"full{k}"))
            )
            statuses.append(status)
            if status == 429:
                assert int(headers["Retry-After"]) >= 1 and "queue is full" in body["error"]
        assert 429 in statuses
        client = s.client(max_retry_wait=1)
        job = client.evaluate(RELU, slow_candidate(0.1, "retry"), **SLOW)
        assert job["result"]["verdict"] == "correct", job["result"]["reason"]
        assert client.retries > 0
    finally:
        assert s.stop() == 0


def test_sigterm_drains_and_a_restart_resumes(tmp_path, cache_dir):
    s = Server(tmp_path, cache_dir)
    client = s.client()
    in_flight = client.submit(RELU, slow_candidate(3, "drain-a"), **SLOW)
    queued = [client.submit(RELU, slow_candidate(0.1, f"drain-{k}"), **SLOW) for k in "bc"]
    wait_for(lambda: client.result(in_flight, wait=False)["status"] == "running", 120, "running")
    # A client holding its connection (?wait=1) for a job queued behind: the drain answers it
    # 202 (queued, for after the restart), and the client polls through the restart to its result.
    held: dict = {}
    holder = threading.Thread(
        target=lambda: held.update(
            job=s.client(max_retry_wait=1).evaluate(RELU, slow_candidate(0.1, "drain-held"), **SLOW)
        )
    )
    holder.start()
    wait_for(lambda: http(s, "GET", "/v1/health")[1]["queue"]["queued"] == 3, 60, "held job queued")
    s.process.send_signal(signal.SIGTERM)
    wait_for(lambda: http(s, "GET", "/v1/health")[0] == 503, 120, "draining")
    status, body, headers = http(s, "POST", "/v1/evaluations", request(HONEST))
    assert status == 503 and "draining" in body["error"] and headers["Retry-After"]
    status, body, _ = http(s, "POST", "/v1/batches", [request(HONEST)])
    assert status == 503 and "draining" in body["error"]
    assert s.stop(None) == 0
    assert "drained: 3 queued jobs kept" in s.log.read_text()

    restarted = Server(tmp_path, cache_dir, db=s.db, port=int(s.port))  # where the client waits
    try:
        client = restarted.client()
        done = client.result(in_flight, wait=False)
        assert done["status"] == "done" and done["result"]["verdict"] == "correct"
        for job_id in queued:
            assert client.result(job_id)["result"]["verdict"] == "correct"
        holder.join(timeout=300)
        assert held["job"]["status"] == "done", held
        assert held["job"]["result"]["verdict"] == "correct"
    finally:
        assert restarted.stop() == 0


def forked_by(folder: Path) -> list[int]:
    """Live processes forked by a kbv whose command line names `folder` (they keep its argv
    until they exec; a worker's sandbox relay never does)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(folder) in cmdline and "serve" in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def test_a_second_sigterm_stops_at_once_and_the_restart_runs_the_job_again(tmp_path, cache_dir):
    """A drain waiting on a long evaluation: a second signal ends the service now; the job that
    was running is queued again at the next start and evaluated there."""
    s = Server(tmp_path, cache_dir)
    long = s.client().submit(RELU, slow_candidate(30, "second-signal"), **SLOW)
    wait_for(lambda: s.client().result(long, wait=False)["status"] == "running", 120, "running")
    s.process.send_signal(signal.SIGTERM)
    wait_for(lambda: http(s, "GET", "/v1/health")[0] == 503, 60, "draining")
    started = time.monotonic()
    assert s.stop(signal.SIGTERM, timeout=20) == 128 + signal.SIGTERM
    assert time.monotonic() - started < 10
    assert "SIGTERM again: stopping now" in s.log.read_text()
    restarted = Server(tmp_path, cache_dir, db=s.db)
    try:
        status, body, _ = http(restarted, "GET", f"/v1/evaluations/{long}")
        assert status == 200 and body["status"] in ("queued", "running"), body
    finally:
        restarted.process.kill()  # its 30 s import need not finish
        restarted.process.wait()
    # Killed as it restarted the job, it leaves none of the processes it forked (each dies with
    # it, even one forked just before the kill: CI once found two such workers running on).
    wait_for(lambda: not forked_by(tmp_path), 30, "the killed service's workers to end")


def test_timed_evaluations_carry_the_reward_components(server):
    """With timing on (the quick profile): the speedup against the TF32 baseline with its
    interval, the peak-memory ratio, and the shaped reward of a correct sample at least 1."""
    import sys

    sys.path.insert(0, str(REPO))
    from examples.rl.kbv_reward import shaped_reward

    timed = {"draws": 2, "profile": "quick", "problem_name": "level1/3_ReLU"}
    job = server.client().evaluate(RELU, HONEST, **timed)
    assert job["status"] == "done" and job["result"]["verdict"] == "correct", job
    reward = job["reward"]
    speedup = reward["speedup"]
    assert speedup["ci_low"] <= speedup["value"] <= speedup["ci_high"], speedup
    assert isinstance(speedup["tie"], bool)
    assert reward["memory_ratio"] > 0
    # The recipe (docs/serve.md): 1 for correct, plus log2 of the interval's low end (0 to 2,
    # nothing for a tie), less up to 0.5 for raising peak memory.
    bonus = 0.0 if speedup["tie"] else min(2.0, max(0.0, math.log2(speedup["ci_low"])))
    penalty = min(0.5, 0.1 * math.log2(reward["memory_ratio"])) if reward["memory_ratio"] > 1 else 0
    assert shaped_reward(job) == pytest.approx(1.0 + bonus - penalty)
    assert 0.5 <= shaped_reward(job) <= 3.0


def test_refuses_to_start_without_a_token(tmp_path):
    (tmp_path / "empty").write_text("\n")
    for token_file in (tmp_path / "empty", tmp_path / "absent"):
        done = subprocess.run(
            [kbv_binary(), "serve", "--port", "0", "--token-file", str(token_file)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert done.returncode == 2 and "token" in done.stderr


def test_client_raises_on_refusals(server):
    with pytest.raises(KbvError) as error:
        Client(server.url, "wrong").submit(RELU, HONEST)
    assert error.value.status == 401


def test_a_result_of_kbv_run_answers_the_service(tmp_path, cache_dir):
    # The same key as kbv run: a database kbv run filled answers the service's requests.
    run = tmp_path / "candidates" / "model" / "level1"
    run.mkdir(parents=True)
    (run / "3_ReLU.py").write_text(ZEROS)
    db = tmp_path / "shared.sqlite"
    command = [kbv_binary(), "run", "--problems", str(PROBLEMS), "--db", str(db), "--quiet",
               "--candidates", str(tmp_path / "candidates"), "--device", "cpu",
               "--cache-dir", str(cache_dir), "--draws", "2", "--no-timing"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    s = Server(tmp_path, cache_dir, db=db)
    try:
        status, body, _ = http(s, "POST", "/v1/evaluations", request(ZEROS))
        assert status == 200 and body["from_store"], body
        assert body["result"]["verdict"] == "incorrect"
        assert body["reward"]["correct"] is False
    finally:
        assert s.stop() == 0
