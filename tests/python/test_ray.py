"""`kbv run --ray ADDRESS` and `kbv serve --ray ADDRESS` on a local Ray cluster
(ray.cluster_utils: a head without CPUs, so no task runs beside the driver, and two one-CPU nodes
on this machine): their verdicts equal one machine's, a rerun (a repeated request) evaluates
nothing stored, and a node lost mid-shard (mid-batch) costs only its unfinished tasks, which
finish on the other node, with nothing stored twice.

The cluster is slow to start on a small machine, so it is started once, and every scenario that
needs it runs in one test: pytest-xdist would otherwise start a cluster per worker (its
`--dist loadgroup` would keep marked tests together, but does not with pytest 9.2:
pytest-dev/pytest-xdist#1386)."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS, REPO, WRONG, kbv_binary, wait_for
from test_run import QUICK_RUN, kbv_run
from test_serve import HANGS, HONEST, IDENTITY, ZEROS, Server, http, request, slow_candidate
from test_shard_merge import two_problem_suite

sys.path.insert(0, str(REPO / "python"))
from kbv.ray_run import Attempt, Shard, problem_broken, why_missing  # noqa: E402
from kbv.ray_serve import cluster_state, serve  # noqa: E402
from kbv.ray_shard import (  # noqa: E402
    ShardError,
    StoreWatcher,
    reclaim_abandoned_folders,
    write_files,
)

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's floor is 75 MiB; nothing large goes through it
NODE = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES}  # each worker node


def rows(db):
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT key, run, problem, level, problem_id, sample, candidate_path, verdict "
            "FROM results ORDER BY key"
        ).fetchall()


def kbv_run_ray(address, candidates, db, cache_dir, *extra, problems=PROBLEMS):
    """`kbv run --ray` as kbv_run runs `kbv run`, started (the caller reads its stderr)."""
    command = [
        kbv_binary(), "run", "--ray", address, "--problems", str(problems),
        "--candidates", str(candidates), "--db", str(db), "--cache-dir", str(cache_dir),
        "--timeout", "8", *[a for a in QUICK_RUN if a != "-q"], "--jobs", "1", *extra,
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def cluster():
    ray_cluster_utils = pytest.importorskip("ray.cluster_utils")
    # The nodes' Ray workers inherit this environment: they import kbv.ray_shard from this tree
    # and run this tree's kbv (on a real cluster, the kbv installed on each node).
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "KBV_BIN")}
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "python"), saved["PYTHONPATH"]) if p
    )
    os.environ["KBV_BIN"] = kbv_binary()
    started = ray_cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={**NODE, "num_cpus": 0, "include_dashboard": False},
    )
    try:
        nodes = [started.add_node(**NODE) for _ in range(2)]
        started.wait_for_nodes()
        yield started, nodes
    finally:
        started.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def node_loss_suite(root):
    """3_ReLU with two candidates evaluated in this order on one node: a quick one, then one that
    hangs until the call timeout (the window in which its node is lost); and a problem that
    cannot be imported, with one candidate."""
    problems = root / "problems" / "level1"
    problems.mkdir(parents=True)
    shutil.copy(PROBLEMS / "level1" / "3_ReLU.py", problems)
    (problems / "99_Broken.py").write_text(
        "import torch\nraise RuntimeError('this problem is broken on purpose')\n"
    )
    run = root / "cands" / "modelC"
    run.mkdir(parents=True)
    relu = CPU_CANDIDATES / "level1" / "3_ReLU.py"
    shutil.copy(relu, run / "level_1_problem_3_sample_0_kernel.py")
    shutil.copy(WRONG / "hangs.py", run / "level_1_problem_3_sample_1_kernel.py")
    shutil.copy(relu, run / "level_1_problem_99_sample_0_kernel.py")
    return root / "problems", root / "cands"


@pytest.mark.e2e
def test_on_the_cluster(cluster, tmp_path, cache_dir):
    """kbv run --ray, then kbv serve --ray, on the one cluster."""
    for name in ("run", "serve"):
        (tmp_path / name).mkdir()
    run_on_the_cluster(cluster, tmp_path / "run", cache_dir)
    serve_on_the_cluster(cluster, tmp_path / "serve", cache_dir)


def run_on_the_cluster(cluster, tmp_path, cache_dir):
    """kbv run --ray: one machine's verdicts, a rerun sends nothing, a node lost mid-shard, a
    stored timeout evaluated again under a longer timeout."""
    ray_cluster, nodes = cluster
    address = ray_cluster.address

    # 1. The bundled suite's slice (two problems, three tasks) on the cluster and on one machine.
    candidates = two_problem_suite(tmp_path / "same")
    # Under --ray the device is the cluster's, cuda unless told: this cluster has no GPU.
    done = subprocess.run(
        [kbv_binary(), "run", "--ray", address, "--problems", str(PROBLEMS),
         "--candidates", str(candidates), "--db", str(tmp_path / "gpu.sqlite")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "has no GPU: give --device cpu" in done.stderr, done.stderr
    whole = tmp_path / "whole.sqlite"
    done = kbv_run(candidates, whole, cache_dir=cache_dir)
    assert done.returncode == 0, done.stderr
    on_ray = tmp_path / "ray.sqlite"
    run = kbv_run_ray(address, candidates, on_ray, cache_dir)
    out, err = run.communicate(timeout=600)
    print(err, out)  # shown when the test fails, with -rP otherwise
    assert run.returncode == 0, err
    assert "3 tasks: 3 evaluated now, 0 already stored" in out, out
    assert "on 2 Ray nodes" in out, out  # the two problems at once, one per node
    assert len(re.findall(r"\[\d/3\] ", err)) == 3, err  # a progress line per row, as kbv run's
    assert rows(on_ray) == rows(whole)  # keys, row info, this machine's paths and the verdicts

    # 2. A rerun evaluates nothing stored: no task is sent.
    run = kbv_run_ray(address, candidates, on_ray, cache_dir)
    out, err = run.communicate(timeout=300)
    print(err, out)
    assert run.returncode == 0, err
    assert "3 tasks: 0 evaluated now, 3 already stored" in out, out
    assert "started on" not in err

    # 3. A node lost after the first of its shard's two rows: the other task goes elsewhere. Beside
    # it, a problem that cannot be imported is reported with the node's reason, not retried.
    problems, candidates = node_loss_suite(tmp_path / "loss")
    lossy = tmp_path / "lossy.sqlite"
    run = kbv_run_ray(address, candidates, lossy, cache_dir, problems=problems)
    err_lines, relu_node = [], None
    deadline = time.monotonic() + 300
    for line in run.stderr:
        err_lines.append(line)
        started = re.search(r"3_ReLU.py \(2 tasks\) started on \S+ \(node ([0-9a-f]+)\)", line)
        if started:
            relu_node = started.group(1)
        if line.startswith("[kbv] [1/3] "):
            assert "sample_0" in line, line  # the quick one came back; the hanging one runs
            (lost,) = [n for n in nodes if n.node_id.startswith(relu_node)]
            ray_cluster.remove_node(lost)
            break
        assert time.monotonic() < deadline, "".join(err_lines)
    out, err = run.communicate(timeout=300)
    err = "".join(err_lines) + err
    print(err, out)
    assert run.returncode == 0, err
    assert "1 of its 2 tasks submitted again (attempt 2 of 3)" in err, err
    assert "[2/3]" in err and "sample_1" in err, err
    assert "3 tasks: 2 evaluated now" in out, out
    assert "on 2 Ray nodes" in out, out
    broken = problems / "level1" / "99_Broken.py"
    assert f"problem {broken} could not be evaluated (its candidates were skipped): on " in out
    assert "raised RuntimeError: this problem is broken on purpose" in out, out
    assert "kbv-shard-" not in out  # the node's folder is not in the reason
    stored = rows(lossy)
    assert len(stored) == 2 and len({r[0] for r in stored}) == 2
    assert sorted(r[-1] for r in stored) == ["correct", "timeout"], stored
    assert "not kept" not in err and "replaced the first" not in err  # nothing came back twice

    # 4. A rerun under a longer call timeout evaluates the stored timeout again (on the node left)
    # and its new result replaces the stored one, as kbv run's would; the correct one stays.
    before = {r[0]: r for r in rows(lossy)}
    run = kbv_run_ray(address, candidates, lossy, cache_dir, "--timeout", "9", problems=problems)
    out, err = run.communicate(timeout=300)
    print(err, out)
    assert run.returncode == 0, err
    assert "3 tasks: 1 evaluated now, 1 already stored" in out, out
    assert "1 stored timeout evaluated again under the longer timeout" in out, out
    after = {r[0]: r for r in rows(lossy)}
    assert after.keys() == before.keys()
    (timed_out,) = [k for k, r in before.items() if r[-1] == "timeout"]
    with sqlite3.connect(lossy) as con:
        (limits,) = con.execute(
            "SELECT json_extract(result_json, '$.limits.call_timeout_s') FROM results "
            "WHERE key = ?",
            (timed_out,),
        ).fetchone()
    assert limits == 9  # the new evaluation's


def serve_rows(db):
    """The service's rows as kbv report reads them: key, row info and verdict."""
    columns = "key, run, problem, level, problem_id, sample, verdict"
    with sqlite3.connect(db) as con:
        return con.execute(f"SELECT {columns} FROM results ORDER BY key").fetchall()


def serve_on_the_cluster(cluster, tmp_path, cache_dir):
    """kbv serve --ray: the local service's verdicts and rows, batches of one problem on warm
    reference sessions, answers from the store, a node lost mid-batch, and SIGTERM's drain with
    an evaluation in flight on the cluster."""
    ray_cluster, _ = cluster
    while len(ray_cluster.worker_nodes) < 2:  # the test before this one removed a node
        ray_cluster.add_node(**NODE)
    ray_cluster.wait_for_nodes()
    address = ray_cluster.address
    for name in ("local", "ray", "gpu"):
        (tmp_path / name).mkdir()

    # Under --ray the device is the cluster's, cuda unless told: this cluster has no GPU.
    gpu = tmp_path / "gpu"
    (gpu / "token").write_text("t0ken\n")
    done = subprocess.run(
        [kbv_binary(), "serve", "--ray", address, "--port", "0",
         "--token-file", str(gpu / "token"), "--db", str(gpu / "x.sqlite")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "has no GPU: give --device cpu" in done.stderr, done.stderr

    local = Server(tmp_path / "local", cache_dir)
    on_ray = Server(tmp_path / "ray", cache_dir, "--ray", address)
    try:
        a_batch_on_the_cluster_and_here(on_ray, local)
        a_node_lost_mid_batch_then_the_drain(ray_cluster, on_ray)
    finally:
        for server in (local, on_ray):  # stopped by then, unless a check failed
            if server.process.poll() is None:
                server.process.kill()


def a_batch_on_the_cluster_and_here(on_ray, local):
    """A batch of one problem's samples, on the cluster and on this machine."""
    health = http(on_ray, "GET", "/v1/health")[1]
    assert "devices" not in health and health["cluster"]["connected"], health
    assert health["cluster"]["cpus"] == 2 and health["workers"] == 2, health
    assert sum(n["cpus"] == 1 for n in health["cluster"]["nodes"]) == 2, health
    batch = [request(c) for c in (HONEST, ZEROS, IDENTITY)]
    on_ray_ids = on_ray.client().batch(batch, wait=False)
    local_ids = local.client().batch(batch, wait=False)
    jobs = [on_ray.client().result(i) for i in on_ray_ids]
    local_jobs = [local.client().result(i) for i in local_ids]
    assert local.stop() == 0
    log = on_ray.log.read_text()
    print(log)
    verdicts = [j["result"]["verdict"] for j in jobs]
    assert verdicts == [j["result"]["verdict"] for j in local_jobs], log
    assert verdicts == ["correct", "incorrect", "incorrect"]
    # The rows a local evaluation writes: the same keys and row info, this machine's files.
    assert serve_rows(on_ray.db) == serve_rows(local.db)
    sources = f"{on_ray.db}.serve/sources/"
    assert all(j["result"]["candidate"]["path"].startswith(sources) for j in jobs)
    assert all(j["result"]["problem"]["name"] == "3_ReLU" for j in jobs)
    # Three samples over two free nodes: a batch of two, whose second sample found the node's
    # reference session warm, and a batch of one.
    assert "#1 (2 tasks) started on" in log and "(1 task) started on" in log, log
    assert sum(j["result"]["problem"]["reference"]["reused"] for j in jobs) == 1
    status, body, _ = http(on_ray, "POST", "/v1/evaluations", request(ZEROS))
    assert status == 200 and body["from_store"] and body["result"] == jobs[1]["result"]


def a_node_lost_mid_batch_then_the_drain(ray_cluster, on_ray):
    """[quick, hang] on one node and [quick] on the other; the node of the first is removed once
    its quick sample is back, while its hang runs. Only the hang is sent again, to the other
    node; SIGTERM while it runs there: the drain waits for it."""
    seen = len(on_ray.log.read_text())
    client = on_ray.client()
    limits = {"allow_library": True, "timeout": 8}
    quick = [slow_candidate(0, f"lost-{k}-{time.time_ns()}") for k in "ab"]
    ids = client.batch([request(c, **limits) for c in (quick[0], HANGS, quick[1])], wait=False)
    started = wait_for(
        lambda: re.search(
            r"#\d+ \(2 tasks\) started on \S+ \(node ([0-9a-f]+)\)", on_ray.log.read_text()[seen:]
        ),
        120,
        "the batch of two",
    )
    assert client.result(ids[0])["result"]["verdict"] == "correct"
    (lost,) = [n for n in ray_cluster.worker_nodes if n.node_id.startswith(started.group(1))]
    ray_cluster.remove_node(lost)
    wait_for(
        lambda: "1 of its 2 tasks submitted again (attempt 2 of 3)" in on_ray.log.read_text(),
        120,
        "the hang sent again",
    )
    assert on_ray.stop() == 0
    log = on_ray.log.read_text()
    print(log[seen:])
    assert "drained: 0 queued jobs kept" in log, log[seen:]
    with sqlite3.connect(f"{on_ray.db}.serve/jobs.sqlite") as con:
        statuses = dict(con.execute("SELECT id, status FROM jobs").fetchall())
    assert [statuses[i] for i in ids] == ["done"] * 3, statuses
    rows = serve_rows(on_ray.db)
    assert len(rows) == 6 and "timeout" in {r[-1] for r in rows}, rows
    assert "not stored" not in log  # every row came back under its job's key


FAKE_DRIVER = r"""
import json, sys, time
from pathlib import Path

# A stand-in for `python -m kbv.ray_serve` (its protocol, without Ray): the first start takes a
# batch and dies with it; the second answers each task of its first batch with a row (a "broken"
# candidate's as missing) and one row under a key no job has, then dies too; the third never
# connects (a head that is gone).
starts = Path(sys.argv[-1])
start = int(starts.read_text()) + 1 if starts.exists() else 1
starts.write_text(str(start))
if start >= 3:
    time.sleep(3600)
cluster = {"nodes": [{"node_id": "n1", "address": "10.0.0.9", "cpus": 1, "gpus": 0, "slots": 1}],
           "cpus": 1, "gpus": 0, "slots": 1}
print(json.dumps({"event": "ready", "cluster": cluster}), flush=True)
for line in sys.stdin:
    shard = json.loads(line)["submit"]
    print(json.dumps({"event": "started", "shard": shard["name"], "node": "10.0.0.9",
                      "node_id": "n1", "attempt": 1}), flush=True)
    if start == 1:
        sys.exit(1)
    for task in shard["tasks"]:
        if "broken" in Path(task["path"]).read_text():
            print(json.dumps({"event": "missing", "shard": shard["name"], "keys": [task["key"]],
                              "why": "on 10.0.0.9: its problem raised"}), flush=True)
            continue
        row = {"verdict": "correct", "reason": "", "flags": [],
               "candidate": {"path": "/node/" + task["relative"]},
               "problem": {"path": "/node/problems/" + shard["problem"]["relative"]},
               "_row": {"key": task["key"], "run": "000_x", "problem": "3_ReLU",
                        "finished_at": "2026-01-02T03:04:05Z"}}
        print(json.dumps({"event": "row", "node": "10.0.0.9", "node_id": "n1", "row": row}),
              flush=True)
    foreign = {"verdict": "correct", "_row": {"key": "f" * 64, "run": "x", "problem": "y"}}
    print(json.dumps({"event": "row", "node": "10.0.0.9", "node_id": "n1", "row": foreign}),
          flush=True)
    sys.exit(1)
"""


def test_serve_on_ray_requeues_what_a_dead_driver_held_and_starts_it_again(tmp_path, cache_dir):
    """kbv serve's side of the driver's protocol, with a stand-in driver (no Ray, no cluster):
    a driver that dies with a batch in flight gives its jobs back to the queue and is started
    again; rows are stored as a local evaluation's (the job's row info, this machine's files);
    a missing key fails its job with the node's reason; a row no job asked for is not stored;
    and SIGTERM's drain does not wait for a driver that cannot connect."""
    driver = tmp_path / "fake_driver.py"
    driver.write_text(FAKE_DRIVER)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {driver} "$@" {tmp_path / "starts"}\n')
    python.chmod(0o755)
    saved = os.environ.get("KBV_PYTHON")
    os.environ["KBV_PYTHON"] = str(python)
    try:
        s = Server(tmp_path, cache_dir, "--ray", "10.0.0.1:6379")
    finally:
        if saved is None:
            os.environ.pop("KBV_PYTHON")
        else:
            os.environ["KBV_PYTHON"] = saved
    try:
        health = http(s, "GET", "/v1/health")[1]
        assert health["cluster"]["address"] == "10.0.0.1:6379" and health["workers"] == 1
        assert health["cluster"]["connected"] and health["cluster"]["nodes"][0]["node_id"] == "n1"
        client = s.client()
        ids = client.batch([request(HONEST), request("# broken\n" + HONEST)], wait=False)
        done, failed = client.result(ids[0]), client.result(ids[1])
        log = s.log.read_text()
        print(log)
        assert "the Ray driver ended with status 1: its 2 jobs in flight queued again" in log
        assert "starting it again in 5 s" in log
        assert done["status"] == "done" and done["result"]["verdict"] == "correct", done
        assert done["result"]["candidate"]["path"].startswith(f"{s.db}.serve/sources/")
        assert failed["status"] == "failed" and failed["error"] == "on 10.0.0.9: its problem raised"
        wait_for(lambda: (tmp_path / "starts").read_text() == "3", 60, "a third start")
        health = http(s, "GET", "/v1/health")[1]  # while it cannot connect: no task slots
        assert not health["cluster"]["connected"] and health["workers"] == 0, health
        assert s.stop(timeout=30) == 0
    finally:
        if s.process.poll() is None:
            s.process.kill()
    with sqlite3.connect(s.db) as con:
        stored = con.execute("SELECT key, run, problem, level, problem_id, finished_at "
                             "FROM results").fetchall()  # fmt: skip
    assert stored == [(stored[0][0], "serve", "level1/3_ReLU", 1, 3, "2026-01-02T03:04:05Z")]
    log = s.log.read_text()
    assert "matches no job" in log
    assert "drained: 0 queued jobs kept" in log


def test_ray_refuses_shard_and_devices(tmp_path):
    for extra in (["--shard", "0/2"], ["--devices", "cpu,cpu"]):
        done = subprocess.run(
            [kbv_binary(), "run", "--ray", "auto", "--problems", str(PROBLEMS),
             "--candidates", str(tmp_path), "--db", str(tmp_path / "x.sqlite"), *extra],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "--ray splits the suite itself" in done.stderr
        assert not (tmp_path / "x.sqlite").exists()


def test_without_ray_it_says_how_to_install_it(tmp_path):
    """A Python without Ray (here: one where importing it fails) is a usage error naming the pin;
    nothing is evaluated."""
    python = tmp_path / "python-without-ray"
    python.write_text(
        "#!/bin/sh\n"
        "shift 2  # -m kbv.ray_run\n"
        f"exec {sys.executable} -c \"import sys; sys.modules['ray'] = None; "
        'from kbv.ray_run import main; sys.exit(main(sys.argv[1:]))" "$@"\n'
    )
    python.chmod(0o755)
    candidates = two_problem_suite(tmp_path)
    done = subprocess.run(
        [kbv_binary(), "run", "--ray", "auto", "--problems", str(PROBLEMS),
         "--candidates", str(candidates), "--db", str(tmp_path / "x.sqlite"), "--device", "cpu"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "KBV_PYTHON": str(python)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "kbv run --ray needs Ray" in done.stderr and "ray==2.60.0" in done.stderr
    assert "3 tasks: 0 already in" in done.stderr  # the plan was made; nothing more
    assert "[1/3]" not in done.stderr


def test_a_shard_ships_its_files_in_their_layout(tmp_path):
    problem = tmp_path / "p" / "level1" / "3_ReLU.py"
    problem.parent.mkdir(parents=True)
    problem.write_text("# problem\n")
    cands = [tmp_path / "c" / f"s{i}.py" for i in range(2)]
    cands[0].parent.mkdir()
    for i, c in enumerate(cands):
        c.write_text(f"# candidate {i}\n")
    shard = Shard.from_plan(
        {
            "problem": {"path": str(problem), "relative": "level1/3_ReLU.py"},
            "tasks": [
                {"key": f"k{i}", "path": str(c), "relative": f"run/s{i}.py"}
                for i, c in enumerate(cands)
            ],
        }
    )
    files = shard.files({"k1"})  # a shard sent again: only what is missing
    assert files == {
        "problems/level1/3_ReLU.py": b"# problem\n",
        "candidates/run/s1.py": b"# candidate 1\n",
    }
    node = tmp_path / "node"
    write_files(node, files)
    assert (node / "candidates" / "run" / "s1.py").read_bytes() == b"# candidate 1\n"
    with pytest.raises(ShardError):
        write_files(node, {"../escape.py": b""})
    assert not (tmp_path / "escape.py").exists()


def test_the_node_side_reads_its_rows_through_kbv_export(tmp_path):
    watcher = StoreWatcher(kbv_binary(), tmp_path / "absent.sqlite")
    assert watcher.new_rows() == []  # nothing stored yet
    shard = Shard("p", "level1/3_ReLU.py", [])
    missing = Attempt(shard, 1, {"k"}, node="10.0.0.2", status=0)
    missing.output = (
        "1 tasks: 0 evaluated now, 0 already stored, 0 files skipped\n"
        "problem level1/3_ReLU.py could not be evaluated (its candidates were skipped): "
        "level1/3_ReLU.py: importing 3_ReLU.py raised RuntimeError: broken\n"
    )
    assert why_missing(missing) == (
        "on 10.0.0.2: level1/3_ReLU.py: importing 3_ReLU.py raised RuntimeError: broken"
    )
    assert problem_broken(missing)  # the request's fault under kbv serve --ray
    missing.output = ""
    assert why_missing(missing) == "on 10.0.0.2: kbv stored no result for it"
    assert not problem_broken(missing)
    failed = Attempt(shard, 1, {"k"}, node="10.0.0.2", status=3, output="kbv: internal error")
    assert "ended with status 3" in why_missing(failed)
    assert not problem_broken(failed)


def test_a_killed_tasks_folder_is_reclaimed_by_the_next(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    abandoned = tmp_path / f"kbv-shard-{dead.pid}-abc"
    running = tmp_path / f"kbv-shard-{os.getpid()}-def"
    for folder in (abandoned, running):
        (folder / "candidates").mkdir(parents=True)
    assert reclaim_abandoned_folders(tmp_path) == 1
    assert not abandoned.exists() and running.exists()


class FakeRay:
    """Enough of Ray for ShardQueue, without a cluster: each submitted task is a scripted list of
    items, an exception in it standing for a failure at that point."""

    class exceptions:  # noqa: N801 - Ray's own spelling
        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            pass

        class NodeDiedError(RayError):
            pass

    def __init__(self, scripts):
        self.scripts = list(scripts)  # one per task submitted, in order
        self.submitted = []  # the files of each task
        self.arguments = []  # the node's kbv run options of each task

    def remote(self, function):
        fake = self

        class Submit:  # as Ray's: what options() gives has no options() of its own
            def remote(self, files, device, node_arguments):
                fake.submitted.append(files)
                fake.arguments.append(node_arguments)
                return iter(fake.scripts.pop(0))

        class RemoteFunction:
            def options(self, **_):
                return Submit()

        return RemoteFunction()

    def wait(self, generators, num_returns=1, timeout=None):
        return generators[:num_returns], generators[num_returns:]

    def get(self, item):
        if isinstance(item, Exception):
            raise item
        return item


def planned_shard(tmp_path, keys):
    problem = tmp_path / "3_ReLU.py"
    problem.write_text("# problem\n")
    tasks = []
    for key in keys:
        (tmp_path / f"{key}.py").write_text(f"# {key}\n")
        tasks.append({"key": key, "path": str(tmp_path / f"{key}.py"), "relative": f"r/{key}.py"})
    return Shard.from_plan({"problem": {"path": str(problem), "relative": "level1/3_ReLU.py"},
                            "tasks": tasks})  # fmt: skip


def row(key):
    return {"verdict": "correct", "_row": {"key": key}}


def started(node):
    return {"event": "started", "node": node, "node_id": f"{node}-id"}


def test_a_lost_shard_is_sent_again_with_what_did_not_come_back(tmp_path, monkeypatch):
    from kbv.ray_run import ShardQueue

    lost = FakeRay.exceptions.NodeDiedError("the node died")
    fake = FakeRay([
        [started("a"), {"event": "row", "node": "a", "node_id": "a-id", "row": row("k1")}, lost],
        [started("b"), {"event": "row", "node": "b", "node_id": "b-id", "row": row("k1")},
         {"event": "row", "node": "b", "node_id": "b-id", "row": row("k2")},
         {"event": "row", "node": "b", "node_id": "b-id", "row": row("other-kbv")},
         {"event": "ended", "node": "b", "node_id": "b-id", "status": 0, "output": ""}],
    ])  # fmt: skip
    monkeypatch.setitem(sys.modules, "ray", fake)
    said = []
    queue = ShardQueue("cpu", ["--draws", "1"], attempts=2, say=said.append)
    queue.submit(planned_shard(tmp_path, ["k1", "k2"]))
    events = list(queue.events())
    starts = [(e["node_id"], e["attempt"]) for e in events if e["event"] == "started"]
    assert starts == [("a-id", 1), ("b-id", 2)]  # the node that took each attempt
    events = [e for e in events if e["event"] != "started"]
    # Each planned row once, from the node that stored it; k1, which came back before the loss, is
    # not sent again (the second task's files hold k2's candidate only) and not relayed twice.
    assert [(e["event"], e["row"]["_row"]["key"], e["node_id"]) for e in events] == [
        ("row", "k1", "a-id"),
        ("row", "k2", "b-id"),
        ("row", "other-kbv", "b-id"),  # a key no task has: relayed, for kbv to say so
    ]
    assert sorted(fake.submitted[1]) == ["candidates/r/k2.py", "problems/level1/3_ReLU.py"]
    assert any("1 of its 2 tasks submitted again (attempt 2 of 2)" in line for line in said), said


def test_a_shard_gives_up_after_its_attempts_or_on_its_own_failure(tmp_path, monkeypatch):
    from kbv.ray_run import ShardQueue

    lost = FakeRay.exceptions.NodeDiedError("the node died")
    failed = FakeRay.exceptions.RayTaskError("ShardError: no kbv on this node")
    fake = FakeRay([[started("a"), lost], [started("b"), lost], [started("c"), failed]])
    monkeypatch.setitem(sys.modules, "ray", fake)
    queue = ShardQueue("cuda", [], attempts=2, say=None)
    (tmp_path / "x").mkdir()
    queue.submit(planned_shard(tmp_path / "x", ["k1"]))
    events = [e for e in queue.events() if e["event"] != "started"]
    assert [e["event"] for e in events] == ["missing"]
    assert events[0]["keys"] == ["k1"] and "lost 2 times" in events[0]["why"]
    assert events[0]["fault"] == "harness"  # the cluster's, not the request's
    (tmp_path / "y").mkdir()
    queue.submit(planned_shard(tmp_path / "y", ["k2"]))
    (missing,) = [e for e in queue.events() if e["event"] != "started"]  # not retried
    assert missing["keys"] == ["k2"] and "no kbv on this node" in missing["why"]
    assert len(fake.submitted) == 3


def test_the_serve_driver_takes_batches_as_they_come(tmp_path, monkeypatch):
    """kbv serve --ray's driver loop without a cluster: each submission line is a shard with its
    own name and node options, its events come out as they come, a shard whose files are gone
    comes back missing at once, the cluster's changes are said, and the end of the input ends it
    once every shard has ended."""
    import json
    import queue

    from kbv.ray_run import ShardQueue

    ended = {"event": "ended", "node": "a", "node_id": "a-id", "status": 0, "output": ""}
    fake = FakeRay([[started("a"), {"event": "row", "node": "a", "node_id": "a-id",
                                    "row": row("k1")}, ended]])  # fmt: skip
    monkeypatch.setitem(sys.modules, "ray", fake)
    shards = ShardQueue("cpu", ["--not-these"], say=None)
    entry = {
        "name": "level1/3_ReLU #1",
        "node_arguments": ["--draws", "2"],
        "problem": {"path": str(tmp_path / "3_ReLU.py"), "relative": "3_ReLU.py"},
        "tasks": [{"key": "k1", "path": str(tmp_path / "c.py"), "relative": "000_j/3_ReLU.py"}],
    }
    (tmp_path / "3_ReLU.py").write_text("# problem\n")
    (tmp_path / "c.py").write_text("# candidate\n")
    absent = {**entry["tasks"][0], "key": "k9", "path": str(tmp_path / "absent.py")}
    gone = {**entry, "name": "gone #2", "tasks": [absent]}
    commands = queue.Queue()
    for line in (json.dumps({"submit": entry}), "not json", json.dumps({"submit": gone}), None):
        commands.put(line)
    states = iter([{"nodes": [1, 2], "slots": 2}] + [{"nodes": [1], "slots": 1}] * 100)
    sent = []
    serve(shards, commands, lambda: next(states), sent.append, look_every=0)
    kinds = [e["event"] for e in sent]
    assert kinds[0] == "ready" and sent[0]["cluster"]["slots"] == 2
    assert {"event": "cluster", "nodes": [1], "slots": 1} in sent  # said once, when it changed
    assert kinds.count("cluster") == 1
    (missing,) = [e for e in sent if e["event"] == "missing"]
    assert missing["shard"] == "gone #2" and missing["keys"] == ["k9"]
    assert "could not be read" in missing["why"]
    (began,) = [e for e in sent if e["event"] == "started"]
    assert began["shard"] == "level1/3_ReLU #1"
    assert [e["row"]["_row"]["key"] for e in sent if e["event"] == "row"] == ["k1"]
    assert fake.arguments == [["--draws", "2"]]  # the shard's own options, not the queue's
    assert sorted(fake.submitted[0]) == ["candidates/000_j/3_ReLU.py", "problems/3_ReLU.py"]


def test_the_cluster_is_its_live_nodes_and_their_task_slots():
    nodes = [
        {"NodeID": "h", "Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {}},
        {"NodeID": "a", "Alive": True, "NodeManagerAddress": "10.0.0.2",
         "Resources": {"CPU": 16.0, "GPU": 8.0}},
        {"NodeID": "b", "Alive": False, "NodeManagerAddress": "10.0.0.3",
         "Resources": {"CPU": 4.0, "GPU": 1.0}},
        {"NodeID": "c", "Alive": True, "NodeManagerAddress": "10.0.0.4",
         "Resources": {"CPU": 2.0, "GPU": 4.0}},
    ]  # fmt: skip
    on_gpus = cluster_state(nodes, "cuda")
    assert [n["node_id"] for n in on_gpus["nodes"]] == ["h", "a", "c"]  # the live ones
    assert (on_gpus["gpus"], on_gpus["cpus"]) == (12, 18)
    assert on_gpus["slots"] == 8 + 2  # a task holds a GPU and a CPU
    assert cluster_state(nodes, "cpu")["slots"] == 18
