"""`kbv report` end to end: a real run database in every format, and the HTML page rendered by
headless Chromium (Debian's `chromium`) to a screenshot."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS, WRONG, kbv_binary


@pytest.fixture(scope="module")
def database(tmp_path_factory, cache_dir):
    root = tmp_path_factory.mktemp("report")
    run = root / "cands" / "modelA"
    (run / "level1").mkdir(parents=True)
    shutil.copy(CPU_CANDIDATES / "level1" / "3_ReLU.py", run / "level1" / "3_ReLU.py")
    shutil.copy(WRONG / "relu_zeros.py", run / "level_1_problem_3_sample_1_kernel.py")
    db = root / "results.sqlite"
    done = subprocess.run(
        [kbv_binary(), "run", "--problems", str(PROBLEMS), "--candidates", str(root / "cands"),
         "--db", str(db), "--cache-dir", str(cache_dir), "--device", "cpu", "--draws", "1",
         "--samples", "3", "--rounds", "1", "-q"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return db


def report(db, *args):
    done = subprocess.run([kbv_binary(), "report", str(db), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.e2e
def test_report_formats(database):
    markdown = report(database)
    assert "fast_1" in markdown and "geomean" in markdown
    figures = json.loads(report(database, "--format", "json"))
    assert figures  # the Report object
    rows = list(csv.reader(io.StringIO(report(database, "--format", "csv"))))
    assert len(rows) >= 2 and len(rows[0]) > 5
    html = report(database, "--format", "html")
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html
    assert "http://" not in html and "https://" not in html


@pytest.mark.e2e
def test_compare_two_databases(database):
    done = subprocess.run(
        [kbv_binary(), "compare", str(database), str(database)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_html_report_renders_in_headless_chromium(database, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(report(database, "--format", "html"))
    shot = tmp_path / "report.png"
    subprocess.run(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1400,1800", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert shot.exists() and shot.stat().st_size > 20_000  # a page with tables and plots


# KernelBench's level2/80 in small: max over the features with keepdim leaves one column, minus
# its own mean is 0, GELU(0) = 0: the output is 0 for every input (kbv flags it degenerate).
DEGENERATE_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, max_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.max_dim = max_dim

    def forward(self, x):
        x = self.gemm(x)
        x = torch.max(x, dim=self.max_dim, keepdim=True).values
        x = x - x.mean(dim=1, keepdim=True)
        return torch.nn.functional.gelu(x)


def get_inputs():
    return [torch.rand(64, 128)]


def get_init_inputs():
    return [128, 64, 1]
"""

# The cached-zeros candidate: right for every input of that problem, and fast.
ZEROS_CANDIDATE = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, max_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)
"""

FLAGGED = "level2/80_Gemm_Max_Subtract_GELU"
NOTE = (
    "1 problem flagged degenerate or with a reference failing its float64 run is left out of "
    "the aggregates above; --include-flagged puts it back."
)


@pytest.fixture(scope="module")
def flagged_database(tmp_path_factory, cache_dir):
    """A run over an honest ReLU and the zeros kernel on the degenerate problem."""
    root = tmp_path_factory.mktemp("flagged")
    problems, run = root / "problems", root / "cands" / "modelA"
    for folder in (problems / "level1", problems / "level2", run / "level1", run / "level2"):
        folder.mkdir(parents=True)
    shutil.copy(PROBLEMS / "level1" / "3_ReLU.py", problems / "level1" / "3_ReLU.py")
    shutil.copy(CPU_CANDIDATES / "level1" / "3_ReLU.py", run / "level1" / "3_ReLU.py")
    (problems / f"{FLAGGED}.py").write_text(DEGENERATE_PROBLEM)
    (run / f"{FLAGGED}.py").write_text(ZEROS_CANDIDATE)
    db = root / "results.sqlite"
    done = subprocess.run(
        [kbv_binary(), "run", "--problems", str(problems), "--candidates", str(root / "cands"),
         "--db", str(db), "--cache-dir", str(cache_dir), "--device", "cpu", "--draws", "1",
         "--samples", "3", "--rounds", "1", "-q"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.e2e
def test_flagged_problem_is_left_out_of_every_format(flagged_database):
    default = json.loads(report(flagged_database, "--format", "json"))
    rows = {row["problem"]: row for row in default["tasks"]}
    assert set(rows) == {"3_ReLU", "80_Gemm_Max_Subtract_GELU"}
    assert "problem_degenerate" in rows["80_Gemm_Max_Subtract_GELU"]["problem_flags"]
    assert rows["3_ReLU"]["problem_flags"] == [] and rows["3_ReLU"]["verdict"] == "correct"
    assert [p["problem"] for p in default["flagged_problems"]] == [FLAGGED]
    (section,) = default["sections"]
    # The honest ReLU alone is in the headline; the flagged problem has its own figures.
    assert section["overall"]["figures"]["tasks"] == 1
    assert section["overall"]["figures"]["correct"] == 1
    assert section["overall"]["flagged_problems_left_out"] == 1
    assert [g["key"] for g in section["flagged"]] == [FLAGGED]
    assert section["flagged"][0]["figures"]["tasks"] == 1

    assert NOTE in report(flagged_database)
    assert NOTE in report(flagged_database, "--format", "html")
    table = list(csv.DictReader(io.StringIO(report(flagged_database, "--format", "csv"))))
    overall = next(r for r in table if r["group_by"] == "overall" and r["variant"] == "all")
    assert overall["tasks"] == "1" and overall["flagged_problems_left_out"] == "1"
    assert any(r["group_by"] == "flagged_problem" and r["group"] == FLAGGED for r in table)

    included = json.loads(report(flagged_database, "--format", "json", "--include-flagged"))
    assert included["sections"][0]["overall"]["figures"]["tasks"] == 2
    assert included["flagged_problems"][0]["in_aggregates"] is True
    assert "are in the aggregates above" not in report(flagged_database, "--include-flagged")
    assert "is in the aggregates above" in report(flagged_database, "--include-flagged")

    done = subprocess.run(
        [kbv_binary(), "compare", str(flagged_database), str(flagged_database)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "in either database is left out of the aggregates above" in done.stdout


def test_report_of_a_missing_database_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [kbv_binary(), "report", str(tmp_path / "none.sqlite")], capture_output=True, text=True
    )
    assert done.returncode == 2
