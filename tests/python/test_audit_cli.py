"""`kbv audit --problems DIR` end to end on the CPU: every problem's reference evaluated as its
own candidate, the table written, a suite's own tooling beside its problems (KernelBench's src/
and scripts/) left out, and a second run resuming from the database (nothing evaluated again)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import PROBLEMS, kbv_binary


@pytest.mark.e2e
def test_audit_tabulates_every_problem_and_resumes(tmp_path, cache_dir):
    suite = tmp_path / "suite"
    (suite / "level1").mkdir(parents=True)
    (suite / "level2").mkdir(parents=True)
    shutil.copy(PROBLEMS / "level1" / "3_ReLU.py", suite / "level1")
    shutil.copy(PROBLEMS / "level2" / "2_Gemm_Scale_Sigmoid.py", suite / "level2")
    (suite / "scripts").mkdir()
    (suite / "scripts" / "helper.py").write_text("raise SystemExit('not a problem')\n")
    db, table = tmp_path / "audit.sqlite", tmp_path / "audit.md"
    command = [kbv_binary(), "audit", "--problems", str(suite), "--db", str(db), "--out",
               str(table), "--cache-dir", str(cache_dir), "--device", "cpu", "--draws", "1",
               "--samples", "3", "--rounds", "1"]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    text = table.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| level")]
    assert len(rows) == 2, text
    assert all("| correct |" in row for row in rows), text
    assert "helper" not in text and "helper" not in first.stderr
    assert "2 problems: 2 pass their own verified check" in text

    again = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert "2 already" in again.stderr + again.stdout, again.stderr
    assert table.read_text().count("| correct |") == 2
