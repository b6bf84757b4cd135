"""End to end on the CPU: every honest C++ candidate of the bundled suite is `correct` under the
verified protocol, with no `reject` flag, and with the result's figures filled in."""

from __future__ import annotations

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS

PROBLEM_FILES = sorted(PROBLEMS.glob("level*/*.py"))


def test_suite_has_the_promised_breadth():
    levels = {p.parent.name for p in PROBLEM_FILES}
    assert len(PROBLEM_FILES) >= 12
    assert levels == {"level1", "level2", "level3"}


@pytest.mark.e2e
@pytest.mark.parametrize("problem", PROBLEM_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_honest_cpu_candidate_is_correct(problem, run_eval):
    candidate = CPU_CANDIDATES / problem.parent.name / problem.name
    assert candidate.exists(), f"no CPU candidate for {problem}"
    evaluation = run_eval(problem, candidate)
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert result["verdict"] == "correct", (result["reason"], result.get("error_detail"))
    assert not evaluation.flag_ids("reject")
    assert "no_custom_kernel" not in evaluation.flag_ids()  # the candidate's own code computed
    for family in ("native", "h1_native", "h2_mixed_sign", "h3_wide_range", "h4_special"):
        assert result["correctness"][family]["ok"], family
    assert result["timing"]["candidate"]["n"] == 3
    assert result["speedup"]["vs_tf32"]["value"] > 0
    assert result["memory"]["candidate_peak_bytes"] >= 0
    assert result["problem"]["degenerate"] is False
