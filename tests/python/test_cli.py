"""The command line contract: exit codes, usage errors with clear messages, the same JSON shape
for every protocol."""

from __future__ import annotations

import subprocess

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS, WRONG, kbv_binary

RELU = PROBLEMS / "level1" / "3_ReLU.py"
RELU_CPU = CPU_CANDIDATES / "level1" / "3_ReLU.py"

TOP_LEVEL_KEYS = {
    "schema", "kbv_version", "verdict", "reason", "flags", "correctness", "timing", "speedup",
    "memory", "problem", "candidate", "protocol", "environment", "isolation", "durations_s",
}  # fmt: skip


def kbv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kbv_binary(), *args], capture_output=True, text=True, timeout=300)


def test_missing_problem_file_is_a_usage_error(tmp_path):
    done = kbv("eval", "-p", str(tmp_path / "nope.py"), "-c", str(RELU_CPU), "--device", "cpu")
    assert done.returncode == 2
    assert "does not exist" in done.stderr


def test_missing_candidate_file_is_a_usage_error(tmp_path):
    done = kbv("eval", "-p", str(RELU), "-c", str(tmp_path / "nope.py"), "--device", "cpu")
    assert done.returncode == 2
    assert "does not exist" in done.stderr


def test_unknown_protocol_and_device_are_usage_errors():
    assert kbv("eval", "-p", str(RELU), "-c", str(RELU_CPU), "--protocol", "x").returncode == 2
    done = kbv("eval", "-p", str(RELU), "-c", str(RELU_CPU), "--device", "tpu")
    assert done.returncode == 2 and "--device" in done.stderr


def test_problem_without_get_inputs_is_a_usage_error(tmp_path):
    problem = tmp_path / "no_inputs.py"
    problem.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    done = kbv("eval", "-p", str(problem), "-c", str(WRONG / "relu_zeros.py"), "--device", "cpu")
    assert done.returncode == 2
    assert "get_inputs" in done.stderr


def test_version():
    done = kbv("--version")
    assert done.returncode == 0 and done.stdout.strip()


@pytest.mark.e2e
@pytest.mark.parametrize("protocol", ["verified", "kbv-paper", "standard"])
def test_every_protocol_gives_the_same_json_shape(protocol, run_eval):
    evaluation = run_eval(RELU, RELU_CPU, "--protocol", protocol)
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert TOP_LEVEL_KEYS <= set(result)
    assert result["schema"] == "kbv.result/1"
    assert result["verdict"] == "correct", result["reason"]
    assert result["protocol"]["name"] == protocol
    assert result["environment"]["protocol"] == protocol
    for key in ("vs_tf32", "vs_fp32"):
        assert {"value", "ci_low", "ci_high", "tie"} <= set(result["speedup"][key])
    for key in ("candidate", "baseline_tf32", "baseline_fp32"):
        assert {"median_ms", "ci_low_ms", "ci_high_ms", "n"} <= set(result["timing"][key])
    memory = result["memory"]
    assert {"candidate_peak_bytes", "reference_peak_bytes", "peak_ratio"} <= set(memory)
    assert {"candidate_persistent_bytes", "reference_persistent_bytes"} <= set(memory)
    assert {"name", "sha256", "degenerate"} <= set(result["problem"])
    assert len(result["problem"]["sha256"]) == 64
    assert len(result["environment"]["seed_sha256"]) == 64
    for family in result["correctness"].values():
        assert {"draws", "passed", "ok", "max_abs", "max_rel", "normwise_rel"} <= set(family)


@pytest.mark.e2e
def test_paper_protocol_misses_what_verified_catches(run_eval):
    """The published protocol's scaled native inputs include x-1, so identity-ReLU fails there
    too; but a dropped ones-initialised scale passes it and fails the verified protocol."""
    candidate = WRONG / "gemm_scale_dropped.py"
    problem = PROBLEMS / "level2" / "2_Gemm_Scale_Sigmoid.py"
    assert run_eval(problem, candidate, "--protocol", "kbv-paper").verdict == "correct"
    assert run_eval(problem, candidate, "--protocol", "verified").verdict == "incorrect"


@pytest.mark.e2e
def test_degenerate_problem_is_flagged(tmp_path, run_eval):
    problem = tmp_path / "degenerate.py"
    problem.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x - x\n"
        "def get_inputs():\n"
        "    return [torch.rand(8, 16)]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    evaluation = run_eval(problem, WRONG / "relu_zeros.py")
    assert evaluation.result["problem"]["degenerate"] is True
    assert "problem_degenerate" in evaluation.flag_ids("warn")
