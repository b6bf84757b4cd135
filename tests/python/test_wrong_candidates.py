"""End to end on the CPU: obviously wrong and broken candidates each end as the right verdict
with a reason a person can act on, and kbv itself exits 0 for all of them."""

from __future__ import annotations

import pytest
from conftest import WRONG, target_problem

# file -> (verdict, a flag id that must be present or None, words the reason must contain)
EXPECTED = {
    "relu_identity.py": ("incorrect", None, "h2_mixed_sign"),
    "relu_zeros.py": ("incorrect", None, "wrong on"),
    "relu_nan.py": ("incorrect", None, "non-finite"),
    "relu_returns_list.py": ("incorrect", None, "sequence"),
    "softmax_no_max_subtraction.py": ("incorrect", None, "h3_wide_range"),
    "matmul_fp16.py": ("incorrect", None, "wrong on"),
    "matmul_wrong_shape.py": ("incorrect", None, "shape"),
    "matmul_wrong_dtype.py": ("incorrect", None, "dtype"),
    "gemm_scale_dropped.py": ("incorrect", None, "h1_native"),
    "syntax_error.py": ("compile_error", None, "syntax error"),
    "no_modelnew.py": ("compile_error", None, "ModelNew"),
    "compile_error.py": ("compile_error", None, "failed to build"),
    "bad_constructor.py": ("runtime_error", None, "cannot be constructed"),
    "bad_forward_signature.py": ("runtime_error", None, "forward raised TypeError"),
    "raises_in_forward.py": ("runtime_error", None, "forward raised"),
    "segfault.py": ("runtime_error", None, "SIGSEGV"),
    "hangs.py": ("timeout", None, "did not answer"),
    "fills_scratch.py": ("runtime_error", None, "scratch quota exceeded"),
    "mutates_input.py": ("rejected", "inputs_mutated", "inputs_mutated"),
    "returns_input_alias.py": ("rejected", "output_aliases_input", "output_aliases_input"),
}


def test_every_zoo_file_has_an_expectation():
    assert {p.name for p in WRONG.glob("*.py")} == set(EXPECTED)


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_wrong_candidate_verdict(name, run_eval, monkeypatch):
    verdict, flag, words = EXPECTED[name]
    candidate = WRONG / name
    extra = ["--timeout", "8"] if name == "hangs.py" else []
    if name == "fills_scratch.py":  # 64 MiB instead of the default 4 GiB: the same path, cheaper
        monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(64 << 20))
    evaluation = run_eval(target_problem(candidate), candidate, *extra)
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert result["verdict"] == verdict, result["reason"]
    assert words.lower() in result["reason"].lower(), result["reason"]
    if flag:
        assert flag in evaluation.flag_ids("reject")
    if verdict != "rejected":
        assert not evaluation.flag_ids("reject"), result["flags"]
    if verdict in ("incorrect", "rejected", "compile_error", "runtime_error", "timeout"):
        assert result["timing"] is None  # only correct candidates are timed
    if name == "compile_error.py":  # the compiler's own words (one failing build, not two)
        assert "error" in result["error_detail"].lower()
    if name == "gemm_scale_dropped.py":
        # The ones-initialised scale is only caught because parameters are re-drawn (S10).
        assert result["correctness"]["native"]["ok"]
        assert not result["correctness"]["h1_native"]["ok"]
