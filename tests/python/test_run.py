"""`kbv run` end to end on the CPU: discovery in both layouts, results streamed to SQLite,
resume after completion and after kill -9, and the export formats."""

from __future__ import annotations

import collections
import datetime
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest
from conftest import CANCELLING_MATMUL, CPU_CANDIDATES, PROBLEMS, WRONG, kbv_binary

QUICK_RUN = ["--device", "cpu", "--draws", "1", "--samples", "2", "--rounds", "1", "-q"]


def make_suite(root):
    """Two runs: a plain-layout one and a KernelBench-generations one, plus a stray file."""
    plain = root / "cands" / "plain" / "level1"
    plain.mkdir(parents=True)
    shutil.copy(CPU_CANDIDATES / "level1" / "3_ReLU.py", plain / "3_ReLU.py")
    generations = root / "cands" / "modelB"
    generations.mkdir(parents=True)
    shutil.copy(WRONG / "relu_zeros.py", generations / "level_1_problem_3_sample_0_kernel.py")
    shutil.copy(WRONG / "syntax_error.py", generations / "level_1_problem_3_sample_1_kernel.py")
    shutil.copy(WRONG / "hangs.py", generations / "level_1_problem_3_sample_2_kernel.py")
    (generations / "level_1_problem_999_sample_0_kernel.py").write_text("x = 1\n")
    (generations / "notes.py").write_text("x = 1\n")
    return root / "cands"


def kbv_run(candidates, db, *extra, cache_dir, env=None):
    command = [
        kbv_binary(), "run", "--problems", str(PROBLEMS), "--candidates", str(candidates),
        "--db", str(db), "--cache-dir", str(cache_dir), "--timeout", "8", *QUICK_RUN, *extra,
    ]  # fmt: skip
    environment = {**os.environ, **env} if env else None
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=environment)


def verdicts_and_reasons(db):
    with sqlite3.connect(db) as con:
        found = [json.loads(r) for (r,) in con.execute("SELECT result_json FROM results")]
    return [(r["verdict"], r["reason"][:300], [f["id"] for f in r["flags"]]) for r in found]


def rows(db):
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT run, problem, level, problem_id, sample, verdict FROM results "
            "ORDER BY run, sample"
        ).fetchall()


@pytest.mark.e2e
def test_run_streams_resumes_and_exports(tmp_path, cache_dir):
    candidates = make_suite(tmp_path)
    db = tmp_path / "results.sqlite"
    first = kbv_run(candidates, db, cache_dir=cache_dir)
    assert first.returncode == 0, first.stderr
    assert "4 tasks: 4 evaluated now" in first.stdout
    assert "2 files skipped" in first.stdout
    assert rows(db) == [
        ("modelB", "3_ReLU", 1, 3, 0, "incorrect"),
        ("modelB", "3_ReLU", 1, 3, 1, "compile_error"),
        ("modelB", "3_ReLU", 1, 3, 2, "timeout"),
        ("plain", "3_ReLU", 1, 3, 0, "correct"),
    ], verdicts_and_reasons(db)  # CI under load once saw the hang `rejected`: say why
    # One evaluation at a time: each task after the first found its worker started ahead,
    # during the evaluation before it.
    with sqlite3.connect(db) as con:
        results = [json.loads(r) for (r,) in con.execute("SELECT result_json FROM results")]
    ahead = [r["candidate"].get("worker_started_ahead", False) for r in results]
    assert sorted(ahead) == [False, True, True, True]
    again = kbv_run(candidates, db, cache_dir=cache_dir)
    assert "0 evaluated now, 4 already stored" in again.stdout

    lines = subprocess.run([kbv_binary(), "export", str(db)], capture_output=True, text=True)
    exported = [json.loads(line) for line in lines.stdout.splitlines()]
    assert len(exported) == 4 and all(r["schema"] == "kbv.result/1" for r in exported)

    out = tmp_path / "kb"
    done = subprocess.run(
        [kbv_binary(), "export", str(db), "--format", "kernelbench", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    kb = json.loads((out / "modelB" / "level_1" / "eval_results.json").read_text())
    samples = {e["sample_id"]: e for e in kb["3"]}
    assert samples[1]["compiled"] is False and samples[0]["correctness"] is False
    plain = json.loads((out / "plain" / "level_1" / "eval_results.json").read_text())
    assert plain["3"][0]["correctness"] is True and plain["3"][0]["runtime"] > 0


@pytest.mark.e2e
@pytest.mark.parametrize("spares", ["1", "0"])
def test_a_spare_reference_worker_takes_the_next_session(tmp_path, cache_dir, spares):
    """With spares on (the default on a GPU; KBV_SPARE_REFERENCES=1 here), a device thread keeps
    one reference worker started before a problem needs it, and the next session that is not
    already started ahead takes it: of three problems one at a time, the first (its evaluation's
    own session, the second's started ahead beside the spare) and the third (started ahead
    during the second) run on spares; the verdicts are the same as without. Off (the CPU's
    default), no session says it came from a spare."""
    plain = tmp_path / "cands" / "plain" / "level1"
    plain.mkdir(parents=True)
    names = ("3_ReLU.py", "4_Softmax.py", "5_LayerNorm.py")
    for name in names:
        shutil.copy(CPU_CANDIDATES / "level1" / name, plain / name)
    db = tmp_path / "spares.sqlite"
    work = tmp_path / "work"
    work.mkdir()
    env = {"KBV_SPARE_REFERENCES": spares, "TMPDIR": str(work)}
    done = kbv_run(
        tmp_path / "cands", db, "--workers-per-device", "1", cache_dir=cache_dir, env=env
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as con:
        results = {
            problem: json.loads(text)
            for problem, text in con.execute("SELECT problem, result_json FROM results")
        }
    assert {p: r["verdict"] for p, r in results.items()} == {
        name.removesuffix(".py"): "correct" for name in names
    }
    from_spare = {p for p, r in results.items() if r["problem"]["reference"].get("from_spare")}
    if spares == "1":
        assert from_spare == {"3_ReLU", "5_LayerNorm"}, from_spare
        assert results["4_Softmax"]["problem"]["reference"].get("started_ahead") is True
    else:
        assert from_spare == set()
    # The spare left at the end stopped with the run and its folder went with it.
    assert list((work / "kbv-runs").iterdir()) == []


@pytest.mark.e2e
def test_next_problems_reference_is_started_ahead(tmp_path, cache_dir):
    """One evaluation at a time over two problems: the second problem's reference was started,
    loaded and drawn during the first problem's evaluation (not reused from it), and the second
    result is the same verdict with the same kind of reference record."""
    plain = tmp_path / "cands" / "plain" / "level1"
    plain.mkdir(parents=True)
    for name in ("3_ReLU.py", "4_Softmax.py"):
        shutil.copy(CPU_CANDIDATES / "level1" / name, plain / name)
    db = tmp_path / "two.sqlite"
    trace = tmp_path / "calls.jsonl"
    done = kbv_run(tmp_path / "cands", db, cache_dir=cache_dir, env={"KBV_TRACE_CALLS": str(trace)})
    assert done.returncode == 0, done.stderr
    assert [r[5] for r in rows(db)] == ["correct", "correct"]
    # The session ahead loaded its model on the host and placed it before drawing (on a GPU, only
    # within what it reserved of the device).
    calls = collections.defaultdict(list)
    loads = []
    for line in trace.read_text().splitlines():
        call = json.loads(line)
        if call["role"] == "reference":
            calls[call["pid"]].append(call["cmd"])
        if call["cmd"] in ("load_problem", "load_candidate"):
            loads.append(call)
    # Every load says where its time went: what its process's start took, and each step.
    steps = {
        "load_problem": ["process_start", "import", "construct", "to_device", "initial_state",
                         "template", "meta_forward", "environment"],
        "load_candidate": ["process_start", "guards", "build_lock", "import", "construct",
                           "to_device"],
    }  # fmt: skip
    assert {c["cmd"] for c in loads} == set(steps), loads
    for call in loads:
        assert set(call["detail"]) == set(steps[call["cmd"]]), call  # (the trace sorts keys)
        assert all(v >= 0 for v in call["detail"].values()), call
        assert call["detail"]["process_start"] > 0, call  # the worker process's imports
        assert call["file"] in {"3_ReLU.py", "4_Softmax.py"}, call  # which problem's worker
        own = sum(v for k, v in call["detail"].items() if k != "process_start")
        assert own <= call["s"], call
    placed = [c for c in calls.values() if "place_model" in c]
    assert len(placed) == 1, dict(calls)
    # Its load kept off the device (outside the gate), the device read after it under the gate.
    assert placed[0][:4] == ["load_problem", "device_facts", "place_model", "prepare_case"], placed
    # The first problem's, loaded by its evaluation, off the device and outside the gate too (a
    # load under the gate held a timing run waiting to start back, and all else with it: session
    # 29's H200 audit), its model placed by the first call that uses it, its first draw.
    own = [c for c in calls.values() if "load_problem" in c and "place_model" not in c]
    assert own and all(c[:3] == ["load_problem", "device_facts", "prepare_case"] for c in own), (
        dict(calls)
    )
    with sqlite3.connect(db) as con:
        results = {
            problem: json.loads(text)
            for problem, text in con.execute("SELECT problem, result_json FROM results")
        }
    # The load's sizes, with the meta forward's (an elementwise forward: outputs as large as its
    # input), and what they reserve before the first draw.
    sizes = results["3_ReLU"]["problem"]["sizes"]
    assert sizes["forward_estimate"] == "meta"
    assert sizes["output_bytes"] == sizes["forward_peak_bytes"] == sizes["input_bytes"] > 0
    assert sizes["working_bytes_before_drawing"] == 9.5 * sizes["input_bytes"]
    first = results["3_ReLU"]["problem"]["reference"]
    second = results["4_Softmax"]["problem"]["reference"]
    assert not first.get("started_ahead") and not first["reused"]
    assert second.get("started_ahead") is True and not second["reused"]
    assert second["prepared_ahead"] is True and second["preparations"] == 1
    assert second["ahead"] == "drawn ahead"  # on the host: no device share to account it in
    assert second["ahead_wait_s"] >= 0 and "prepared_ahead" not in first
    # Drawn ahead, judged the same way: every hidden family was checked on it.
    drawn_ahead = results["4_Softmax"]["correctness"]
    assert set(drawn_ahead) == set(results["3_ReLU"]["correctness"])
    assert all(f["evaluated"] == f["draws"] > 0 for f in drawn_ahead.values())
    assert results["4_Softmax"]["candidate"].get("worker_started_ahead") is True
    # Neither problem has parameters: every timing set's golden outputs are its case's own.
    for name in ("3_ReLU", "4_Softmax"):
        sets = results[name]["timing"]["sets"]
        assert sets["count"] >= 1 and sets["outputs_from_cases"] == sets["count"], sets


def test_problem_failing_while_prepared_ahead_is_reported_as_broken(tmp_path, cache_dir):
    """The next problem's reference is prepared ahead and fails there (its get_inputs raises):
    the failure is not lost with the dropped session. The evaluation repeats the work, the
    problem is reported broken with the problem's own message, and the first result stands."""
    problems = tmp_path / "problems" / "level1"
    problems.mkdir(parents=True)
    shutil.copy(PROBLEMS / "level1" / "3_ReLU.py", problems / "3_ReLU.py")
    broken = (PROBLEMS / "level1" / "4_Softmax.py").read_text()
    broken += "\n\ndef get_inputs():\n    raise RuntimeError('inputs broken on purpose')\n"
    (problems / "4_Softmax.py").write_text(broken)
    plain = tmp_path / "cands" / "plain" / "level1"
    plain.mkdir(parents=True)
    for name in ("3_ReLU.py", "4_Softmax.py"):
        shutil.copy(CPU_CANDIDATES / "level1" / name, plain / name)
    db = tmp_path / "broken.sqlite"
    command = [
        kbv_binary(), "run", "--problems", str(tmp_path / "problems"),
        "--candidates", str(tmp_path / "cands"), "--db", str(db), "--cache-dir", str(cache_dir),
        "--timeout", "8", *QUICK_RUN,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "4_Softmax.py could not be evaluated" in done.stdout
    assert "inputs broken on purpose" in done.stdout
    assert [r[1] for r in rows(db)] == ["3_ReLU"] and rows(db)[0][5] == "correct"


@pytest.mark.e2e
def test_kill_9_loses_nothing_and_repeats_nothing(tmp_path, cache_dir):
    candidates = make_suite(tmp_path)
    db = tmp_path / "results.sqlite"
    command = [
        kbv_binary(), "run", "--problems", str(PROBLEMS), "--candidates", str(candidates),
        "--db", str(db), "--cache-dir", str(cache_dir), "--timeout", "8", *QUICK_RUN,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if db.exists() and len(rows(db)) >= 1:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    stored_before = rows(db)
    assert 1 <= len(stored_before) < 4
    resumed = kbv_run(candidates, db, cache_dir=cache_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(stored_before)} already stored" in resumed.stdout
    after = rows(db)
    assert len(after) == 4 and len(set(after)) == 4
    assert set(stored_before) <= set(after)


def test_missing_folders_are_usage_errors(tmp_path):
    done = subprocess.run(
        [kbv_binary(), "run", "--problems", str(tmp_path / "none"), "--candidates", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr


def run_beside_one_at_a_time(tmp_path, cache_dir, *extra):
    """The suite run one evaluation at a time, then with `extra`: both succeed with the same
    rows. Returns the second database."""
    candidates = make_suite(tmp_path)
    one, other = tmp_path / "one.sqlite", tmp_path / "other.sqlite"
    assert kbv_run(candidates, one, cache_dir=cache_dir).returncode == 0
    done = kbv_run(candidates, other, *extra, cache_dir=cache_dir)
    assert done.returncode == 0, done.stderr
    assert rows(other) == rows(one)
    return other


@pytest.mark.e2e
def test_two_fake_devices_give_the_same_verdicts(tmp_path, cache_dir):
    """The multi-device scheduler on the CPU: two workers side by side (`--devices cpu,cpu`)
    evaluate every task once, with the verdicts of a one-device run."""
    run_beside_one_at_a_time(tmp_path, cache_dir, "--devices", "cpu,cpu")


@pytest.mark.e2e
def test_several_evaluations_per_device_give_the_same_verdicts(tmp_path, cache_dir):
    """Three evaluations at once on one device (`--workers-per-device 3`): every task once, the
    verdicts of a one-at-a-time run, timing still done (one timing run at a time), and a
    failure while the device was shared evaluated again alone before it is stored."""
    three = run_beside_one_at_a_time(tmp_path, cache_dir, "--workers-per-device", "3")
    with sqlite3.connect(three) as con:
        results = [json.loads(r) for (r,) in con.execute("SELECT result_json FROM results")]
    by_verdict = {}
    for r in results:
        by_verdict.setdefault(r["verdict"], []).append(r)
    correct = by_verdict["correct"]
    assert correct and all(r["speedup"].get("vs_tf32") for r in correct)
    (hang,) = by_verdict["timeout"]
    assert "evaluated_alone" in {f["id"] for f in hang["flags"]}
    # Its problem loaded and its candidate's worker started while the others finished, not after
    # the drain with the device idle (DeviceThread::start_retry_ahead).
    assert hang["candidate"].get("worker_started_ahead") is True
    assert hang["problem"]["reference"].get("started_ahead") is True
    # Evaluated again with no other evaluation running (their memory gone from the device): no
    # other result was stored while the second attempt ran (finished_at has 1 s resolution).
    with sqlite3.connect(three) as con:
        stored = {
            json.loads(r)["candidate"]["path"]: datetime.datetime.fromisoformat(t).timestamp()
            for r, t in con.execute("SELECT result_json, finished_at FROM results")
        }
    hang_end = stored.pop(hang["candidate"]["path"])
    hang_start = hang_end - hang["durations_s"]["total"]
    assert hang["durations_s"]["total"] > 3
    assert not [t for t in stored.values() if hang_start + 1 < t < hang_end - 1]
    assert all(
        "evaluated_alone" not in {f["id"] for f in r["flags"]} for r in by_verdict["correct"]
    )
    assert all(
        "gate_wait" in r["durations_s"]["split"]
        for r in results
        if "split" in r.get("durations_s", {})
    )


def test_bad_devices_spec_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [kbv_binary(), "run", "--problems", str(PROBLEMS), "--candidates", str(tmp_path),
         "--devices", "tpu:0"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 2 and "--devices" in done.stderr


# A bfloat16 product of the cancelling matmul (conftest.CANCELLING_MATMUL, whose sensitivity is
# deferred) is far over the floor, so judging it needs the sensitivity's float64 runs.
BFLOAT16_PRODUCT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, w):
        return (x.to(torch.bfloat16) @ w.to(torch.bfloat16)).to(x.dtype)
"""


@pytest.mark.e2e
def test_room_for_a_deferred_sensitivity_is_made_only_when_the_runs_are_needed(tmp_path, cache_dir):
    """Where evaluations share a device, the deferred sensitivity's runs are left out of what
    every evaluation reserves (problem.reference.plan.sensitivity_bytes apart). The reference
    is told so with each request; the judge of a candidate over the floor stops before the runs
    (`sensitivity_room`), the evaluation makes room in the ledger, and the same request then
    measures them. Same verdict as one evaluation at a time, which never stops."""
    problems = tmp_path / "problems" / "level1"
    problems.mkdir(parents=True)
    (problems / "1_Cancelling.py").write_text(CANCELLING_MATMUL)
    candidates = tmp_path / "cands" / "plain" / "level1"
    candidates.mkdir(parents=True)
    (candidates / "1_Cancelling.py").write_text(BFLOAT16_PRODUCT)
    found = {}
    for workers in ("1", "2"):
        trace = tmp_path / f"calls-{workers}.jsonl"
        db = tmp_path / f"{workers}.sqlite"
        done = subprocess.run(
            [kbv_binary(), "run", "--problems", str(problems.parent), "--candidates",
             str(tmp_path / "cands"), "--db", str(db), "--cache-dir", str(cache_dir),
             "--timeout", "20", *QUICK_RUN, "--workers-per-device", workers],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "KBV_TRACE_CALLS": str(trace)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        with sqlite3.connect(db) as con:
            (text,) = con.execute("SELECT result_json FROM results").fetchone()
        calls = [json.loads(line) for line in trace.read_text().splitlines()]
        found[workers] = (json.loads(text), text, [c for c in calls if c["role"] == "reference"])
    alone, alone_text, alone_calls = found["1"]
    shared, shared_text, shared_calls = found["2"]
    assert alone["verdict"] == shared["verdict"] == "incorrect", shared["reason"]

    # Each run draws its own secret: the same reason, up to the figures of its draws (the
    # sensitivity's norm is one since protocol version 4).
    def shape(reason: str) -> str:
        return re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "#", reason)

    assert shape(alone["reason"]) == shape(shared["reason"])
    plan = shared["problem"]["reference"]["plan"]
    assert plan["sensitivity_bytes"] > 0, plan

    def stopped(calls):
        return [i for i, c in enumerate(calls) if c.get("detail") == {"error": "sensitivity_room"}]

    # One evaluation on the device: no ledger, never stopped.
    assert not stopped(alone_calls)
    # Shared: the bfloat16 product's first judge stops once, and the same command follows.
    (at,) = stopped(shared_calls)
    assert shared_calls[at]["cmd"] == "judge"
    assert shared_calls[at + 1]["cmd"] == "judge" and shared_calls[at + 1]["status"] == "ok"
    assert "sensitivity measured for this output" in shared_text
    assert "sensitivity measured for this output" in alone_text
