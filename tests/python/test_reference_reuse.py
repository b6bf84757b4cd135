"""Reference reuse in `kbv run`: the reference work of a problem (cases, golden outputs,
audit, baseline memory) is done once per problem, device and key and shared by every candidate
of that problem; verdicts are the ones separate `kbv eval` calls give; a candidate whose
parameters match differently gets its own cases; another key means new reference work."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS, WRONG, kbv_binary

SETTINGS = ["--device", "cpu", "--draws", "1", "--samples", "2", "--rounds", "1"]
GEMM = PROBLEMS / "level2" / "2_Gemm_Scale_Sigmoid.py"

# No parameter of this ModelNew matches the reference's by name, and two share a shape, so
# nothing can be matched: the reference state is left at its seeded values for this candidate
# alone (params_unmatched), which needs cases drawn for that set of names.
RENAMED = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.w = nn.Parameter(torch.randn(out_features, in_features))
        self.b = nn.Parameter(torch.zeros(out_features))
        self.s = nn.Parameter(torch.ones(out_features))

    def forward(self, x):
        return torch.sigmoid((x @ self.w.t() + self.b) * self.s)
"""


def gemm_candidates(root):
    folder = root / "cands" / "m"
    folder.mkdir(parents=True)
    honest = CPU_CANDIDATES / "level2" / "2_Gemm_Scale_Sigmoid.py"
    files = [
        honest,
        WRONG / "gemm_scale_dropped.py",
        None,  # RENAMED
        None,  # the honest file again under other content (a comment), a distinct candidate
    ]
    paths = []
    for sample, source in enumerate(files):
        path = folder / f"level_2_problem_2_sample_{sample}_kernel.py"
        if sample == 2:
            path.write_text(RENAMED)
        elif sample == 3:
            path.write_text(honest.read_text() + "\n# the same kernel, another file\n")
        else:
            shutil.copy(source, path)
        paths.append(path)
    return root / "cands", paths


def kbv_run(candidates, db, cache_dir, *extra):
    command = [
        kbv_binary(), "run", "--problems", str(PROBLEMS), "--candidates", str(candidates),
        "--db", str(db), "--cache-dir", str(cache_dir), "--timeout", "60", *SETTINGS, *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=1800)


def results(db):
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT sample, result_json FROM results ORDER BY sample").fetchall()
    return {sample: json.loads(text) for sample, text in rows}


def results_by_problem(db):
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT problem, result_json FROM results").fetchall()
    assert len({p for p, _ in rows}) == len(rows)
    return {problem: json.loads(text) for problem, text in rows}


@pytest.mark.e2e
def test_reference_work_is_done_once_per_problem_and_shared(tmp_path, cache_dir, run_eval):
    candidates, paths = gemm_candidates(tmp_path)
    db = tmp_path / "run.sqlite"
    # Builds one at a time, in order: the first evaluation takes a candidate already built, and
    # on a loaded machine a later sample's build could end first (seen once, under a second
    # job's load), which changes which results reuse the session, not whether they do.
    done = kbv_run(candidates, db, cache_dir, "--jobs", "1")
    assert done.returncode == 0, done.stderr
    assert "1 reference session for 4 results" in done.stdout, done.stdout
    by_sample = results(db)
    refs = [by_sample[s]["problem"]["reference"] for s in range(4)]
    assert len({r["key"] for r in refs}) == 1
    assert [r["reused"] for r in refs] == [False, True, True, True]
    assert [r["candidate_index"] for r in refs] == [1, 2, 3, 4]
    # One preparation for the first two; the renamed candidate needs its own cases; the last
    # candidate (ordinary names again) needs the ordinary ones again.
    assert [r["preparations"] for r in refs] == [1, 1, 2, 3]
    assert "params_unmatched" in {f["id"] for f in by_sample[2]["flags"]}
    # The secret, hence the hidden cases, is the session's: every candidate saw the same one.
    assert len({by_sample[s]["environment"]["seed_sha256"] for s in range(4)}) == 1
    for s in range(4):
        split = by_sample[s]["durations_s"]["split"]
        assert set(split) == {"compile", "reference", "candidate", "gate_wait", "idle"}
        # One evaluation at a time and one problem (no reference prepared ahead): the gate is
        # passed, never waited at (microseconds to take it).
        assert split["gate_wait"] < 0.01
        assert all(v >= 0 for v in split.values())
    # A reused reference did no loading or drawing for the second candidate.
    assert (
        by_sample[1]["durations_s"]["split"]["reference"]
        < (by_sample[0]["durations_s"]["split"]["reference"])
    )
    assert "time split (summed over results): compile" in done.stdout

    # Verdicts are those of separate evaluations, each with its own reference.
    for s, path in enumerate(paths):
        alone = run_eval(GEMM, path, *SETTINGS[2:])
        assert alone.returncode == 0, alone.stderr
        assert alone.verdict == by_sample[s]["verdict"], (s, alone.result["reason"])
        assert alone.result["problem"]["reference"]["reused"] is False
        assert alone.result["problem"]["reference"]["preparations"] >= 1


@pytest.mark.e2e
def test_another_key_means_new_reference_work(tmp_path, cache_dir):
    candidates, _ = gemm_candidates(tmp_path)
    for sample in (1, 2, 3):
        (candidates / "m" / f"level_2_problem_2_sample_{sample}_kernel.py").unlink()
    relu = candidates / "m" / "level_1_problem_3_sample_0_kernel.py"
    shutil.copy(CPU_CANDIDATES / "level1" / "3_ReLU.py", relu)
    first = kbv_run(candidates, tmp_path / "a.sqlite", cache_dir)
    assert first.returncode == 0, first.stderr
    # Two problems: two sessions, one each, never shared across problems.
    assert "2 reference sessions for 2 results" in first.stdout, first.stdout
    a = results_by_problem(tmp_path / "a.sqlite")
    assert len(a) == 2
    keys_a = {r["problem"]["name"]: r["problem"]["reference"]["key"] for r in a.values()}
    assert len(set(keys_a.values())) == 2
    # Another protocol (and, being another run, another secret): another key.
    second = kbv_run(candidates, tmp_path / "b.sqlite", cache_dir, "--protocol", "standard")
    assert second.returncode == 0, second.stderr
    b = results_by_problem(tmp_path / "b.sqlite")
    keys_b = {r["problem"]["name"]: r["problem"]["reference"]["key"] for r in b.values()}
    assert not set(keys_a.values()) & set(keys_b.values())
    assert all(r["problem"]["reference"]["preparations"] == 1 for r in b.values())


MUTATES_INPUTS = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.ones(out_features))

    def forward(self, x):
        out = torch.sigmoid(self.gemm(x) * self.scale)
        x.zero_()  # the shared input block: the reference's checksum sees it
        return out
"""


@pytest.mark.e2e
def test_cases_stream_when_none_may_stay_resident(tmp_path, cache_dir, monkeypatch):
    """KernelBench's largest problems keep no case resident on the H200 (docs/case-path.md):
    every case is drawn when used and let go after. The same path on the CPU with a budget of
    0 (KBV_CASE_CACHE_BYTES): a candidate that zeroes its shared inputs is rejected, and the
    honest candidate after it is judged on cases drawn again, unharmed: correct, with the same
    verdicts as with every case resident."""
    folder = tmp_path / "cands" / "m"
    folder.mkdir(parents=True)
    honest = (CPU_CANDIDATES / "level2" / "2_Gemm_Scale_Sigmoid.py").read_text()
    (folder / "level_2_problem_2_sample_0_kernel.py").write_text(MUTATES_INPUTS)
    (folder / "level_2_problem_2_sample_1_kernel.py").write_text(honest)
    (folder / "level_2_problem_2_sample_2_kernel.py").write_text(honest + "\n# again\n")
    monkeypatch.setenv("KBV_CASE_CACHE_BYTES", "0")
    db = tmp_path / "streamed.sqlite"
    done = kbv_run(tmp_path / "cands", db, cache_dir)
    assert done.returncode == 0, done.stderr
    by_sample = results(db)
    assert by_sample[0]["verdict"] == "rejected", by_sample[0]["reason"]
    assert "inputs_mutated" in {f["id"] for f in by_sample[0]["flags"]}
    for s in (1, 2):
        assert by_sample[s]["verdict"] == "correct", by_sample[s]["reason"]
        plan = by_sample[s]["problem"]["reference"]["plan"]
        assert plan["cached_cases"] == 0, plan
        assert plan["fits"].startswith("0 of "), plan
    assert "1 reference session for 3 results" in done.stdout, done.stdout


@pytest.mark.e2e
def test_the_cases_the_rechecks_use_are_drawn_once_when_some_stay_resident(
    tmp_path, run_eval, monkeypatch
):
    """A problem whose cases do not all fit keeps the first two (those the re-checks come back
    to) through the correctness pass, as far as its budget has room beside the case in use: with
    3 cases resident every case is drawn once, and the perturbed re-check's twin once more (plain
    LRU let the first two go and drew them again: two draws more). The call trace says which
    prepare_case calls drew."""
    honest = CPU_CANDIDATES / "level2" / "2_Gemm_Scale_Sigmoid.py"
    first = run_eval(GEMM, honest, "--no-timing")
    assert first.result is not None and first.result["verdict"] == "correct", first.stderr
    plan = first.result["problem"]["reference"]["plan"]
    cases = plan["cached_cases"]
    assert plan["fits"].startswith(f"all {cases} cases resident") and cases > 3, plan
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("KBV_CASE_CACHE_BYTES", str(int(3 * plan["cache_bytes"] / cases)))
    monkeypatch.setenv("KBV_TRACE_CALLS", str(trace))
    kept = run_eval(GEMM, honest, "--no-timing")
    assert kept.result is not None and kept.result["verdict"] == "correct", kept.stderr
    assert kept.result["problem"]["reference"]["plan"]["cached_cases"] == 3
    assert kept.result["candidate"]["rechecks"]["perturbed_values"]["passed"]
    calls = [json.loads(line) for line in trace.read_text().splitlines()]
    prepared = [c for c in calls if c["cmd"] == "prepare_case"]
    drawn = [c for c in prepared if not c.get("detail", {}).get("cached")]
    assert len(drawn) == cases + 1, [c.get("detail") for c in prepared]


@pytest.mark.e2e
def test_the_rechecks_let_case_b_and_the_repeats_copy_go_before_a_fresh_copy_of_a(
    tmp_path, run_eval, monkeypatch
):
    """The re-checks make two copies of case A's inputs (the repeat, kept by the candidate for
    the same-buffers run with B's values, and the fresh-buffers run): when the second is made,
    B and the first copy are done with. Kept, they ran an 80 GB H100 out of memory with the
    device to itself (38_L1Norm_, 88 GiB at once). Then the perturbed run needs only its own
    case. The call trace says what the reference held as each case was shared."""
    honest = CPU_CANDIDATES / "level2" / "2_Gemm_Scale_Sigmoid.py"
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("KBV_TRACE_CALLS", str(trace))
    done = run_eval(GEMM, honest, "--no-timing")
    assert done.result is not None and done.result["verdict"] == "correct", done.stderr
    rechecks = done.result["candidate"]["rechecks"]
    a, b = rechecks["determinism"]["case"], rechecks["fresh_values_in_reused_buffers"]["case"]
    assert a != b
    calls = [json.loads(line) for line in trace.read_text().splitlines()]
    copies = [
        c["detail"]["store"]
        for c in calls
        if c["cmd"] == "share_case" and c.get("detail", {}).get("store", {}).get("fresh")
    ]
    assert len(copies) == 2, copies
    repeat, fresh = copies
    assert sorted(repeat["pinned"]) == sorted([a, b])
    assert repeat["blocks"] == 0
    assert fresh["pinned"] == [a] and fresh["blocks"] == 0, fresh
    # The perturbed run's own case is the only one held for it; A is drawn again only to name
    # a failed perturbed output.
    shares = [c["detail"]["store"] for c in calls if c["cmd"] == "share_case" and "detail" in c]
    perturbed = [s for s in shares if s["case"].endswith("~perturbed")]
    assert len(perturbed) == 1 and perturbed[0]["pinned"] == [perturbed[0]["case"]], perturbed
