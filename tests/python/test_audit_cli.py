"""`kbv audit --problems DIR` end to end on the CPU: every problem's reference evaluated as its
own candidate (in two shards, merged), the table written, a suite's own tooling beside its
problems (KernelBench's src/ and scripts/) left out, and a second run resuming from the database
(nothing evaluated again). The float64 truth goes in chunks of rows (KBV_TRUTH_CHUNK_BYTES made
small, as KernelBench's large problems go at the default) and every self-check still passes."""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess

import pytest
from conftest import PROBLEMS, REPO, kbv_binary


@pytest.mark.e2e
def test_audit_tabulates_every_problem_and_resumes(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("KBV_TRUTH_CHUNK_BYTES", str(16 * 1024))  # the workers inherit it
    suite = tmp_path / "suite"
    (suite / "level1").mkdir(parents=True)
    (suite / "level2").mkdir(parents=True)
    shutil.copy(PROBLEMS / "level1" / "3_ReLU.py", suite / "level1")
    shutil.copy(PROBLEMS / "level2" / "2_Gemm_Scale_Sigmoid.py", suite / "level2")
    # A reference over its own elementwise budget (protocol version 3 admits its excess): the
    # table says so beside its self-check.
    shutil.copy(REPO / "tests" / "data" / "reference_excess" / "problem.py",
                suite / "level1" / "4_Reference_Excess.py")  # fmt: skip
    (suite / "scripts").mkdir()
    (suite / "scripts" / "helper.py").write_text("raise SystemExit('not a problem')\n")
    db, table = tmp_path / "audit.sqlite", tmp_path / "audit.md"
    command = [kbv_binary(), "audit", "--problems", str(suite), "--db", str(db), "--out",
               str(table), "--cache-dir", str(cache_dir), "--device", "cpu", "--draws", "1",
               "--samples", "3", "--rounds", "1"]  # fmt: skip
    # Audited in two shards (one problem each), merged, then tabulated by a whole-suite audit
    # that finds everything stored: the sharded audit is the whole one.
    for shard in ("0/2", "1/2"):
        part = [*command, "--shard", shard, "--db", str(tmp_path / f"shard{shard[0]}.sqlite")]
        done = subprocess.run(part, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        assert re.search(f"shard {shard}: [12] of the suite's 3 tasks", done.stdout + done.stderr)
    merged = subprocess.run(
        [kbv_binary(), "merge", str(tmp_path / "shard0.sqlite"), str(tmp_path / "shard1.sqlite"),
         "-o", str(db)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    first = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    assert "3 already" in first.stderr + first.stdout, first.stderr
    text = table.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| level")]
    assert len(rows) == 3, text
    assert all("| correct |" in row for row in rows), text
    assert "helper" not in text and "helper" not in first.stderr
    assert "3 problems: 3 pass their own verified check" in text
    assert "1 where it is over its own elementwise budget on some case" in text
    excess = next(row for row in rows if "4_Reference_Excess" in row)
    assert "over its elementwise budget on" in excess, excess

    again = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert "3 already" in again.stderr + again.stdout, again.stderr
    assert table.read_text().count("| correct |") == 3

    # As JSON: the cases judged against the floor alone (their sensitivity never measured): all
    # five of ReLU's and the Gemm's; not those where the reference rounds over the floor (all
    # but wide-range inputs, whose larger scale takes the rounding in).
    as_json = tmp_path / "audit.json"
    listed = subprocess.run(
        [*command, "--out", str(as_json), "--format", "json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    floor = {row["problem"].split("/")[-1]: row["floor_judged_cases"]
             for row in json.loads(as_json.read_text())}  # fmt: skip
    assert floor["3_ReLU"] == floor["2_Gemm_Scale_Sigmoid"] == 5, floor
    assert floor["4_Reference_Excess"] < 5, floor
    # Rows apart: the ReLU and the Gemm's truths in chunks of rows, said in the table's `fits`.
    chunks = {row["problem"].split("/")[-1]: row["truth_chunks"]
              for row in json.loads(as_json.read_text())}  # fmt: skip
    assert chunks["3_ReLU"] > 1 and chunks["2_Gemm_Scale_Sigmoid"] > 1, chunks
    relu = next(row for row in rows if "3_ReLU" in row)
    assert f"float64 truth in {chunks['3_ReLU']} chunks of rows" in relu, relu


@pytest.mark.e2e
def test_with_evaluations_side_by_side_a_task_is_placed_after_its_problems_load(
    tmp_path, cache_dir
):
    """Two evaluations at once and more tasks open: a device thread decides whether a task waits
    for the end (its problem needing the device's memory to itself) from the problem's load, so
    a task with no session started ahead has one started and awaited (`wait_load` in the call
    trace) rather than learning its size mid-evaluation and draining the device (session 26's
    H100 audit: 9 such drains). The awaited session is the one its evaluation then uses (its
    worker draws and judges; nothing is loaded twice for it). On the host no load says a problem
    needs the device alone.

    A problem an earlier run over the database found so (the row a GPU run writes, written here)
    goes after the others from the start, without a load to learn it (session 28's resumed H100
    audit spent its first 100 s loading 21 such problems only to put them back): the first in
    the suite's order, taken first otherwise, is taken once every other task is taken or
    reserved, its load after theirs (the last one's aside)."""
    import hashlib
    import sqlite3

    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    names = ("3_ReLU", "4_Softmax", "5_LayerNorm", "6_Sum_reduction_over_a_dimension",
             "8_Argmax_over_a_dimension", "10_MSELoss")  # fmt: skip
    for name in names:
        shutil.copy(PROBLEMS / "level1" / f"{name}.py", suite)
    first = suite / "3_ReLU.py"  # the first in the suite's order (by problem number)
    database = tmp_path / "audit.sqlite"
    with sqlite3.connect(database) as db:
        db.execute(
            "CREATE TABLE device_alone (problem_sha256 TEXT NOT NULL, device_bytes REAL NOT "
            "NULL, working_bytes REAL NOT NULL, recorded_at TEXT NOT NULL, PRIMARY KEY "
            "(problem_sha256, device_bytes))"
        )
        db.execute(
            "INSERT INTO device_alone VALUES (?, 85e9, 60e9, '2026-12-06T00:00:00Z')",
            (hashlib.sha256(first.read_bytes()).hexdigest(),),
        )
    trace = tmp_path / "calls.jsonl"
    done = subprocess.run(
        [kbv_binary(), "audit", "--problems", str(suite.parent), "--db", str(database),
         "--out", str(tmp_path / "audit.md"), "--cache-dir", str(cache_dir), "--device", "cpu",
         "--draws", "1", "--samples", "3", "--rounds", "1", "--workers-per-device", "2"],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "KBV_TRACE_CALLS": str(trace)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{len(names)} problems: {len(names)} pass" in (tmp_path / "audit.md").read_text()
    said = done.stdout + done.stderr
    assert "1 task of 1 problem put after the others from the start" in said, said
    assert "needs the device's memory to itself" not in said, said  # no load said so
    calls = [json.loads(line) for line in trace.read_text().splitlines()]
    awaited = [c for c in calls if c["cmd"] == "wait_load"]
    assert awaited and all(c["role"] == "harness" and c["s"] >= 0 for c in awaited), awaited
    by_pid = collections.defaultdict(list)
    for c in calls:
        if c["role"] == "reference":
            by_pid[c["pid"]].append(c["cmd"])
    for wait in awaited:
        commands = by_pid[wait["pid"]]
        assert commands.count("load_problem") == 1 and "judge" in commands, (wait, commands)
    first_load: dict[str, float] = {}
    for c in sorted(calls, key=lambda c: c["t"]):
        if c["cmd"] == "load_problem":
            first_load.setdefault(c["file"], c["t"])
    order = sorted(first_load, key=first_load.get)
    assert order.index(first.name) >= len(names) - 2, order
