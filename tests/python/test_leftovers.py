"""A killed kbv leaves its work folders (run directories, candidate folders with their scratch)
behind; the next kbv to start reclaims them, and never a folder of a kbv that is still running.
Its cases were in shared memory the kernel reclaimed with its processes. A killed build leaves
torch's build lock, which the next import of that candidate must not wait for."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from conftest import CPU_CANDIDATES as CPU
from conftest import PROBLEMS, QUICK, kbv_binary

RELU = PROBLEMS / "level1" / "3_ReLU.py"
SLOW = """import time
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(600)
        return torch.relu(x)
"""


def kbv_eval(candidate, work, cache_dir, out, **popen):
    command = [
        kbv_binary(), "eval", "--problem", str(RELU), "--candidate", str(candidate),
        "--device", "cpu", "--work-dir", str(work), "--cache-dir", str(cache_dir),
        "--json", str(out), *QUICK[:-2], "--timeout", "600",
    ]  # fmt: skip
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def folders(work):
    root = work / "kbv-runs"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


@pytest.mark.e2e
def test_a_killed_runs_folders_are_reclaimed_by_the_next_run(tmp_path, cache_dir):
    work = tmp_path / "work"
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW)
    trace = tmp_path / "trace.jsonl"
    killed = kbv_eval(
        slow,
        work,
        cache_dir,
        tmp_path / "killed.json",
        start_new_session=True,
        env={**os.environ, "KBV_TRACE_CALLS": str(trace)},
    )
    # Wait until the candidate is inside its forward: the reference has shared its first case
    # with it (kbv's call trace says so; cases are shared memory, not files to look for).
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (
        trace.exists() and '"cmd":"share_case"' in trace.read_text()
    ):
        time.sleep(0.2)
    assert killed.poll() is None, killed.communicate()
    left = folders(work)
    assert any(n.startswith("kbv-run-") for n in left) and any(
        n.startswith("kbv-cand-") for n in left
    ), left

    # A second kbv starting now must not touch the first one's folders: it is still running.
    honest = tmp_path / "honest.py"
    honest.write_text(SLOW.replace("time.sleep(600)", "pass"))
    beside = kbv_eval(honest, work, cache_dir, tmp_path / "beside.json")
    _, err = beside.communicate(timeout=600)
    assert beside.returncode == 0, err
    assert "reclaimed" not in err
    assert set(left) <= set(folders(work))

    os.killpg(killed.pid, signal.SIGKILL)  # kbv and everything it started
    killed.wait(timeout=60)
    assert set(left) <= set(folders(work))  # left behind, as on a real kill -9

    after = kbv_eval(honest, work, cache_dir, tmp_path / "after.json")
    _, err = after.communicate(timeout=600)
    assert after.returncode == 0, err
    assert "reclaimed 2 work folders" in err, err
    assert not set(left) & set(folders(work))


@pytest.mark.e2e
def test_a_stale_build_lock_left_by_a_killed_build_does_not_hang_the_next_import(
    tmp_path, cache_dir
):
    """torch's build lock is a file: a build killed half-way leaves it, and torch then waits
    for it forever. The candidate's worker builds under kbv's own flock, so it removes such a
    file before importing: the evaluation builds and ends well inside its compile timeout."""
    import hashlib

    import torch

    source = (CPU / "level1" / "3_ReLU.py").read_text() + "\n# stale-lock test copy\n"
    candidate = tmp_path / "3_ReLU.py"
    candidate.write_text(source)
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    build = cache_dir / "torch_extensions" / f"{key}-cpu" / f"torch-{torch.__version__}"
    name = re.search(r'name="([^"]+)"', source).group(1)
    (build / name).mkdir(parents=True, exist_ok=True)
    (build / name / "lock").write_text("")
    out = tmp_path / "result.json"
    started = time.monotonic()
    done = subprocess.run(
        [kbv_binary(), "eval", "--problem", str(RELU), "--candidate", str(candidate),
         "--device", "cpu", "--cache-dir", str(cache_dir), "--json", str(out), "--quiet",
         *QUICK, "--compile-timeout", "600", "--no-timing"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["verdict"] == "correct", result["reason"]
    assert time.monotonic() - started < 600
    assert not (build / name / "lock").exists()
