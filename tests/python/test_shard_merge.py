"""`kbv run --shard I/N` and `kbv merge` end to end on the CPU: two shards run apart and merged
give the rows of a one-machine run; an empty shard is fine; merging is idempotent (overlapping
inputs, the merged file again); a conflict is reported; bad arguments are usage errors."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess

import pytest
from conftest import CPU_CANDIDATES, WRONG, kbv_binary
from test_run import kbv_run

SUITE_TASKS = 3


def two_problem_suite(root):
    """3_ReLU (two candidates) and 4_Softmax (one): shard 0/2 holds 3_ReLU, 1/2 4_Softmax."""
    plain = root / "cands" / "plain" / "level1"
    plain.mkdir(parents=True)
    for name in ("3_ReLU.py", "4_Softmax.py"):
        shutil.copy(CPU_CANDIDATES / "level1" / name, plain / name)
    generations = root / "cands" / "modelB"
    generations.mkdir(parents=True)
    shutil.copy(WRONG / "relu_zeros.py", generations / "level_1_problem_3_sample_0_kernel.py")
    return root / "cands"


def every_row(db):
    """The results table as stored, every column."""
    with sqlite3.connect(db) as con:
        return con.execute("SELECT * FROM results ORDER BY key").fetchall()


def verdict_rows(db):
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT key, run, problem, level, problem_id, sample, verdict FROM results ORDER BY key"
        ).fetchall()


def kbv_merge(*args):
    command = [kbv_binary(), "merge", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cache_dir):
    """One suite run on one machine, as shards 0/2 and 1/2, and as the empty shard 2/3."""
    root = tmp_path_factory.mktemp("shards")
    candidates = two_problem_suite(root)
    done = {}
    for name, extra in {
        "whole": (),
        "s0": ("--shard", "0/2"),
        "s1": ("--shard", "1/2"),
        "empty": ("--shard", "2/3"),
    }.items():
        db = root / f"{name}.sqlite"
        done[name] = (db, kbv_run(candidates, db, *extra, cache_dir=cache_dir))
        assert done[name][1].returncode == 0, done[name][1].stderr
    return root, done


@pytest.mark.e2e
def test_shards_merged_are_the_one_machine_run(runs):
    root, done = runs
    (s0, run0), (s1, run1) = done["s0"], done["s1"]
    assert f"shard 0/2: 2 of the suite's {SUITE_TASKS} tasks (1 problems)" in run0.stdout
    assert f"shard 1/2: 1 of the suite's {SUITE_TASKS} tasks (1 problems)" in run1.stdout
    # By problem: each shard holds all of its problem's candidates and no other problem.
    assert {r[2] for r in verdict_rows(s0)} == {"3_ReLU"}
    assert {r[2] for r in verdict_rows(s1)} == {"4_Softmax"}
    merged = root / "all.sqlite"
    result = kbv_merge(s0, s1, "-o", merged)
    assert result.returncode == 0, result.stderr
    assert "3 rows from 2 databases" in result.stdout
    whole = verdict_rows(done["whole"][0])
    assert len(whole) == SUITE_TASKS
    assert verdict_rows(merged) == whole  # the same keys, rows and verdicts


@pytest.mark.e2e
def test_empty_shard_runs_and_merges_to_nothing_more(runs):
    root, done = runs
    empty, run = done["empty"]
    assert f"shard 2/3: 0 of the suite's {SUITE_TASKS} tasks (0 problems)" in run.stdout
    assert every_row(empty) == []
    merged = root / "with_empty.sqlite"
    result = kbv_merge(done["s0"][0], empty, "-o", merged)
    assert result.returncode == 0, result.stderr
    assert every_row(merged) == every_row(done["s0"][0])


@pytest.mark.e2e
def test_overlapping_merge_and_merging_the_merged_file_again(runs):
    root, done = runs
    s0, s1, whole = done["s0"][0], done["s1"][0], done["whole"][0]
    first = root / "first.sqlite"
    assert kbv_merge(s0, s1, "-o", first).returncode == 0
    overlapping = root / "overlapping.sqlite"
    result = kbv_merge(s0, first, s1, s0, "-o", overlapping)
    assert result.returncode == 0, result.stderr
    assert "conflict" not in result.stderr
    assert every_row(overlapping) == every_row(first)
    again = root / "again.sqlite"
    assert kbv_merge(overlapping, "-o", again).returncode == 0
    assert every_row(again) == every_row(first)
    # The one-machine run's rows have the same keys but were evaluated apart (their timings
    # differ): merged with the shards, each key is kept once, and each differing result is a
    # conflict the merge reports.
    mixed = root / "mixed.sqlite"
    result = kbv_merge(first, whole, "-o", mixed)
    assert result.returncode == 0, result.stderr
    assert len(every_row(mixed)) == SUITE_TASKS
    assert result.stderr.count("kbv merge: conflict on") == SUITE_TASKS


@pytest.mark.e2e
def test_a_conflict_keeps_the_later_result_and_is_reported(runs):
    root, done = runs
    s1 = done["s1"][0]
    redone = root / "redone.sqlite"
    shutil.copy(s1, redone)
    with sqlite3.connect(redone) as con:
        (key, text) = con.execute("SELECT key, result_json FROM results").fetchone()
        changed = json.loads(text)
        changed["verdict"] = "incorrect"
        con.execute(
            "UPDATE results SET result_json = ?, verdict = 'incorrect', "
            "finished_at = '2999-01-01T00:00:00Z' WHERE key = ?",
            (json.dumps(changed), key),
        )
    merged = root / "conflict.sqlite"
    result = kbv_merge(s1, redone, "-o", merged)
    assert result.returncode == 0, result.stderr
    assert "kbv merge: conflict on plain 4_Softmax" in result.stderr
    assert f"kept the result of {redone}" in result.stderr
    assert "finished at 2999-01-01T00:00:00Z" in result.stderr
    assert [r[-1] for r in verdict_rows(merged)] == ["incorrect"]


def test_bad_shards_and_merges_are_usage_errors(tmp_path):
    for bad in ("2/2", "-1/2", "1/0", "half"):
        result = subprocess.run(
            [kbv_binary(), "run", "--problems", "problems", "--candidates", str(tmp_path),
             "--db", str(tmp_path / "x.sqlite"), "--device", "cpu", "--shard", bad],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 2, (bad, result.stderr)
        assert "--shard takes I/N" in result.stderr
        assert not (tmp_path / "x.sqlite").exists()
    result = kbv_merge(tmp_path / "missing.sqlite", "-o", tmp_path / "out.sqlite")
    assert result.returncode == 2 and "does not exist" in result.stderr
    notes = tmp_path / "notes.sqlite"
    notes.write_text("these are notes, not a database of kbv results at all\n")
    result = kbv_merge(notes, "-o", tmp_path / "out.sqlite")
    assert result.returncode == 2 and "is not a kbv result database" in result.stderr
    result = kbv_merge(notes, "-o", notes)
    assert result.returncode == 2 and "is also an input" in result.stderr
    assert notes.read_text().startswith("these are notes")
    assert not (tmp_path / "out.sqlite").exists()
