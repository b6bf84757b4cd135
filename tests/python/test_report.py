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


def test_report_of_a_missing_database_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [kbv_binary(), "report", str(tmp_path / "none.sqlite")], capture_output=True, text=True
    )
    assert done.returncode == 2
