"""Protocol version 3: where the reference itself is outside the elementwise budget (its float32
arithmetic rounds further than the first-order budget says), a copy of the reference is
`correct`, and a candidate is admitted up to 4x the reference's own excess, no further.

Found on the H200: 16 of KernelBench's last 84 references were `incorrect` against themselves
under version 2 (docs/results/verdict-policy-v3.md)."""

from __future__ import annotations

from conftest import REPO

DATA = REPO / "tests" / "data" / "reference_excess"
# No timing: the verdict is the point. PyTorch candidates: --allow-library.
ARGS = ("--no-timing", "--allow-library")


def _outputs(result: dict) -> list[dict]:
    return [
        output
        for family in result["correctness"].values()
        if isinstance(family, dict)
        for case in family.get("cases", [])
        for output in case["outputs"]
    ]


def test_a_copy_of_a_reference_over_its_own_budget_is_correct(run_eval):
    e = run_eval(DATA / "problem.py", DATA / "copy.py", *ARGS)
    assert e.result is not None, e.stderr
    assert e.result["verdict"] == "correct", e.result.get("reason")
    assert e.result["environment"]["protocol_version"] == 5
    outputs = _outputs(e.result)
    admitted = [o for o in outputs if (o.get("reference_vs_budget") or {}).get("elements_over")]
    # The reference is over its budget on most cases (every element is rounded to 0.0625), and
    # each such pass says so; every margin stays at most 1.
    assert len(admitted) >= 5
    assert all("within the reference's own excess" in o["reason"] for o in admitted)
    assert all(o["margins"]["elementwise"] <= 1 for o in outputs)


def test_one_element_beyond_the_references_excess_is_incorrect(run_eval):
    e = run_eval(DATA / "problem.py", DATA / "one_off.py", *ARGS)
    assert e.result is not None, e.stderr
    assert e.result["verdict"] == "incorrect"
    assert "element [0, 100]" in e.result["reason"]
    assert "beyond the reference's own excess" in e.result["reason"]
