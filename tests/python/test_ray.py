"""`kbv run --ray ADDRESS` on a local Ray cluster (ray.cluster_utils: a head without CPUs, so no
task runs beside the driver, and two one-CPU nodes on this machine): its verdicts equal a
one-machine `kbv run`'s, a rerun evaluates nothing stored, and a node lost mid-shard costs only
its unfinished tasks, which finish on the other node, with nothing stored twice.

The cluster is slow to start on a small machine, so it is started once, and every scenario that
needs it is one test: pytest-xdist would otherwise start a cluster per worker."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS, REPO, WRONG, kbv_binary
from test_run import QUICK_RUN, kbv_run
from test_shard_merge import two_problem_suite

sys.path.insert(0, str(REPO / "python"))
from kbv.ray_run import Attempt, Shard, why_missing  # noqa: E402
from kbv.ray_shard import (  # noqa: E402
    ShardError,
    StoreWatcher,
    reclaim_abandoned_folders,
    write_files,
)

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's floor is 75 MiB; nothing large goes through it


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
    small = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES}
    started = ray_cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={**small, "num_cpus": 0, "include_dashboard": False},
    )
    try:
        nodes = [started.add_node(**small) for _ in range(2)]
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
def test_ray_run_matches_one_machine_resumes_and_survives_a_lost_node(cluster, tmp_path, cache_dir):
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
    missing.output = ""
    assert why_missing(missing) == "on 10.0.0.2: kbv stored no result for it"
    failed = Attempt(shard, 1, {"k"}, node="10.0.0.2", status=3, output="kbv: internal error")
    assert "ended with status 3" in why_missing(failed)


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

    def remote(self, function):
        fake = self

        class Submit:  # as Ray's: what options() gives has no options() of its own
            def remote(self, files, device, node_arguments):
                fake.submitted.append(files)
                return iter(fake.scripts.pop(0))

        class RemoteFunction:
            def options(self, **_):
                return Submit()

        return RemoteFunction()

    def wait(self, generators, num_returns=1):
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
    events = list(queue.events())
    assert [e["event"] for e in events] == ["missing"]
    assert events[0]["keys"] == ["k1"] and "lost 2 times" in events[0]["why"]
    (tmp_path / "y").mkdir()
    queue.submit(planned_shard(tmp_path / "y", ["k2"]))
    (missing,) = list(queue.events())  # not retried: the same on any node
    assert missing["keys"] == ["k2"] and "no kbv on this node" in missing["why"]
    assert len(fake.submitted) == 3
