"""Issue 18 on the CPU: a problem whose inputs are 512 MiB a case is evaluated under `verified`
with TMPDIR (the work root) on a 256 MiB tmpfs. The cases live in the reference's shared memory
(memfd), never in files, so the disk an evaluation needs is its logs, whatever the problem's
size; under the old file path this run could not have written its first case."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import CPU_CANDIDATES, REPO, kbv_binary

PROBLEM = (
    REPO / "tests" / "data" / "large_inputs" / "level1" / "6_Sum_reduction_over_a_dimension.py"
)
CANDIDATE = CPU_CANDIDATES / "level1" / "6_Sum_reduction_over_a_dimension.py"
TMPFS_BYTES = 256 << 20


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c",
         "mount -t tmpfs -o size=1m tmpfs /mnt && echo ok"],
        capture_output=True, text=True,
    )  # fmt: skip
    return probe.returncode == 0 and "ok" in probe.stdout


@pytest.mark.e2e
def test_inputs_larger_than_the_work_roots_disk_evaluate_without_touching_it(tmp_path, cache_dir):
    if not _can_mount_tmpfs():
        pytest.skip("this machine refuses a mount namespace for the tmpfs")
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "result.json"
    usage = tmp_path / "peak-usage.txt"
    # Inside its own mount namespace the test mounts the tmpfs, samples its use while kbv runs
    # (the peak is the evaluation's disk use beyond the build cache) and runs kbv with TMPDIR
    # there; the build cache stays outside. No timing: the disk is the question, and timed calls
    # on such inputs cost minutes of CI's two cores.
    script = f"""
set -e
mount -t tmpfs -o size={TMPFS_BYTES} tmpfs {work}
( peak=0; while true; do
    used=$(df --output=used -B1 {work} | tail -1); [ "$used" -gt "$peak" ] && peak=$used
    echo $peak > {usage}; sleep 0.2; done ) &
sampler=$!
TMPDIR={work} {kbv_binary()} eval --problem {PROBLEM} --candidate {CANDIDATE} --device cpu \\
  --draws 1 --no-timing --timeout 600 --cache-dir {cache_dir} --quiet --json {out}
status=$?
kill $sampler
exit $status
"""
    done = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "bash", "-c", script],
        capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["verdict"] == "correct", (
        result["reason"],
        result.get("error_detail", "")[-2000:],
    )
    inputs = result["problem"]["inputs"][0]
    assert inputs["shape"] == [128, 1024, 1024] and inputs["dtype"] == "float32"
    plan = result["problem"]["reference"]["plan"]
    assert plan["fits"], plan
    peak = int(usage.read_text().split()[0])
    assert peak < 64 << 20, f"the evaluation used {peak} bytes of the work root's disk"
