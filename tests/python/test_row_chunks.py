"""The float64 truth and the sensitivity's runs a chunk of rows at a time (python/kbv/row_chunks.py,
docs/case-path.md), on the CPU through the reference worker's own commands, with the chunk's
budget made small (KBV_TRUTH_CHUNK_BYTES) so that test-sized problems go in chunks. A forward
whose rows are independent gets the same truth as one float64 run over the batch; one that mixes
rows (batch statistics, a square matmul's right operand of the batch's size, a view hard-coded to
the batch) is shown to by the probe and keeps one run, with its reason; a run in chunks measures
the sensitivity of the same elements as one run does. Each test through the role runs on the GPU
too where kbv_native has CUDA and a GPU is present."""

from __future__ import annotations

import copy

import pytest
import torch  # before kbv_native: the module must share torch's CUDA runtime
from conftest import import_native_or_skip_module
from test_float64_truth import CLOSURE as CAPTURED_SUBMODULE

kn = import_native_or_skip_module()

from kbv import reference, row_chunks  # noqa: E402

GPU = bool(getattr(kn, "has_cuda", False)) and torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not GPU, reason="no GPU or no CUDA build")),
]

SECRET = "row-chunks-test-secret"
SMALL = str(16 * 1024)  # bytes: a few rows a chunk for the problems below

ROWWISE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 48)

    def forward(self, x):
        return torch.softmax(self.linear(x), dim=1) * torch.tanh(x[:, :48])


def get_inputs():
    return [torch.randn(96, 64)]


def get_init_inputs():
    return []
"""

# A right operand of the batch's size: its rows must not be split with the left's.
SQUARE_MATMUL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]


def get_init_inputs():
    return []
"""

BATCH_STATISTICS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x - x.mean(dim=0, keepdim=True)


def get_inputs():
    return [torch.randn(96, 64)]


def get_init_inputs():
    return []
"""

batch = 96
HARD_CODED_BATCH = f"""
import torch
import torch.nn as nn

batch_size = {batch}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x.view(batch_size, -1))


def get_inputs():
    return [torch.randn(batch_size, 8, 8)]


def get_init_inputs():
    return []
"""

LOSS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, p, t):
        return torch.mean((p - t) ** 2)


def get_inputs():
    return [torch.randn(96, 64), torch.randn(96, 64)]


def get_init_inputs():
    return []
"""


# Mixes rows only where inputs are negative: the first case (native, torch.rand) hides it.
MIXES_ON_SOME_DATA = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + x.clamp(max=0).sum(dim=0, keepdim=True)


def get_inputs():
    return [torch.rand(96, 64)]


def get_init_inputs():
    return []
"""

# KernelBench level1/14: the mask follows the row's position in the batch.
TRIANGULAR_MATMUL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.tril(a @ b)


def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]


def get_init_inputs():
    return []
"""

# Zero wherever torch.rand draws (the first case): rows that cannot show anything.
ZERO_ON_THE_FIRST_CASE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(-x) * x.mean()


def get_inputs():
    return [torch.rand(96, 64)]


def get_init_inputs():
    return []
"""


# Two outputs, both led by the batch.
TWO_OUTPUTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1), x.square().sum(dim=1)


def get_inputs():
    return [torch.randn(96, 64)]


def get_init_inputs():
    return []
"""


def _case(role, family: str = "native", draw: int = 0) -> reference.Case:
    case_id = f"{family}-{draw}"
    role.cmd_prepare_case(
        {"id": case_id, "family": family, "draw": draw, "redraw": [], "secret": SECRET}
    )
    return role.cases[case_id]


def _whole_float64(role, case: reference.Case) -> list[torch.Tensor]:
    """The truth as one float64 run over the whole batch, outside the role."""
    model64 = copy.deepcopy(role.model).double()
    inputs = [x.double() if x.is_floating_point() else x for x in case.inputs.as_list()]
    with torch.no_grad():
        out = model64(*inputs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setenv("KBV_TRUTH_CHUNK_BYTES", SMALL)


@pytest.mark.parametrize("device", DEVICES)
def test_a_rowwise_forward_gets_the_whole_runs_truth_in_chunks(
    reference_roles, small_chunks, device
):
    role = reference_roles(ROWWISE, device)
    case = _case(role)
    assert case.figures["truth"] == "float64"
    assert case.figures["truth_chunks"] > 1, case.figures
    assert case.figures["truth_rows_note"] is None
    (truth,) = case.judged
    assert truth.dtype == torch.float64 and truth.shape == (96, 48)
    torch.testing.assert_close(truth, _whole_float64(role, case)[0], rtol=1e-12, atol=1e-15)
    # Every family's draw goes the same way (decided once, on the first).
    other = _case(role, "h3_wide_range", 0)
    assert other.figures["truth_chunks"] == case.figures["truth_chunks"]
    torch.testing.assert_close(
        other.judged[0], _whole_float64(role, other)[0], rtol=1e-12, atol=1e-15
    )


def test_a_problem_within_one_chunk_runs_whole_without_a_probe(reference_roles, monkeypatch):
    probed = []
    monkeypatch.setattr(row_chunks, "probe", lambda *a, **k: probed.append(1) or (None, ""))
    role = reference_roles(ROWWISE)  # 96 x 64 floats: far below the default 1 GiB a chunk
    case = _case(role)
    assert case.figures["truth_chunks"] == 1 and case.figures["truth_rows_note"] is None
    assert probed == []


@pytest.mark.parametrize("device", DEVICES)
def test_a_square_matmul_splits_only_its_left_operand(reference_roles, small_chunks, device):
    role = reference_roles(SQUARE_MATMUL, device)
    case = _case(role)
    assert case.figures["truth_chunks"] > 1, case.figures
    assert role._row_plan is not None and role._row_plan.split == (0,)
    a, b = case.inputs.as_list()
    torch.testing.assert_close(case.judged[0], a.double() @ b.double(), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (BATCH_STATISTICS, "the forward mixes rows"),
        (HARD_CODED_BATCH, "the forward on part of the batch failed"),
        (LOSS, "an output's leading dimension is not the batch"),
    ],
    ids=["batch_statistics", "hard_coded_batch", "loss_over_the_batch"],
)
@pytest.mark.parametrize("device", DEVICES)
def test_a_forward_that_mixes_rows_keeps_one_run_and_says_why(
    reference_roles, small_chunks, source, why, device
):
    role = reference_roles(source, device)
    case = _case(role)
    assert case.figures["truth"] == "float64"
    assert case.figures["truth_chunks"] == 1
    if source is LOSS:  # decided from the shapes: no probe, nothing worth a note
        assert role._row_plan is None
    else:
        assert why in case.figures["truth_rows_note"], case.figures["truth_rows_note"]
    torch.testing.assert_close(
        case.judged[0], _whole_float64(role, case)[0], rtol=1e-12, atol=1e-15
    )


def test_the_probe_compares_non_finite_positions_and_values():
    a = torch.tensor([[1.0, float("nan")], [float("inf"), 2.0]], dtype=torch.float64)
    assert row_chunks.same_rows(a, a.clone()) == 0.0
    moved = a.clone()
    moved[1, 0] = float("-inf")
    assert row_chunks.same_rows(a, moved) is None
    nan_elsewhere = a.clone()
    nan_elsewhere[0, 0] = float("nan")
    assert row_chunks.same_rows(a, nan_elsewhere) is None
    close = a.clone()
    close[1, 1] += 1e-14
    assert row_chunks.same_rows(a, close) < row_chunks.PROBE_TOLERANCE
    assert row_chunks.same_rows(a, a[:, :1]) is None  # another shape


def test_chunk_rows_follow_the_budget():
    x = torch.zeros(1000, 256)  # a row: 2 KiB in float64
    out = torch.zeros(1000, 128)  # 1 KiB in float64, counted twice
    plan, why = row_chunks.candidate_plan([x, 3, torch.zeros(256)], [out], budget=40 * 1024)
    assert why == "" and plan is not None
    assert plan.split == (0,)  # the vector of another size and the integer pass whole
    assert plan.chunk_rows == 40 * 1024 // (2 * (2048 + 2 * 1024))
    slices = plan.slices()
    assert slices[0] == slice(0, plan.chunk_rows) and slices[-1].stop == 1000
    assert sum(s.stop - s.start for s in slices) == 1000
    assert row_chunks.candidate_plan([x], [out], budget=0)[0] is None
    assert row_chunks.candidate_plan([x], [out], budget=1 << 30)[1] == "fits in one chunk"


def _deferred_sensitivity(role, case: reference.Case) -> torch.Tensor:
    """The case's sensitivity measured as a judge over the floor would: from private draws."""
    assert case.sensitivity == [reference.DEFERRED]
    (s,) = role._measure_deferred(case, case.judged, initial_state=False)
    return s


@pytest.mark.parametrize("device", DEVICES)
def test_the_sensitivity_in_chunks_measures_what_one_run_measures(
    reference_roles, monkeypatch, device
):
    policy = {
        "kind": "scaled",
        "norm_floor": 1e-3,
        "elem_floor": 1e-2,
        "baseline_multiplier": 4.0,
        "sens_multiplier": 16.0,
        "sens_norm_multiplier": 1.5,
        "admit_reference_excess": True,
    }
    monkeypatch.setenv("KBV_TRUTH_CHUNK_BYTES", "0")
    whole_role = reference_roles(ROWWISE, device, policy=policy)
    whole_case = _case(whole_role)
    monkeypatch.setenv("KBV_TRUTH_CHUNK_BYTES", SMALL)
    chunked_role = reference_roles(ROWWISE, device, policy=policy)
    chunked_case = _case(chunked_role)
    assert whole_case.figures["truth_chunks"] == 1 and chunked_case.figures["truth_chunks"] > 1
    # The same case (same secret): the same inputs and truth.
    assert torch.equal(whole_case.inputs.as_list()[0], chunked_case.inputs.as_list()[0])
    torch.testing.assert_close(whole_case.judged[0], chunked_case.judged[0], rtol=1e-12, atol=1e-15)
    whole = _deferred_sensitivity(whole_role, whole_case)
    chunked = _deferred_sensitivity(chunked_role, chunked_case)
    assert chunked.shape == whole.shape and bool(torch.isfinite(chunked).all())
    # Other normal draws (a chunk's perturbations are drawn chunk by chunk), the same law: the
    # RMS of 8 runs per element, so element by element within a few times, and over 4,608
    # elements the means within a few percent.
    ratio = float(chunked.double().mean() / whole.double().mean())
    assert 0.9 < ratio < 1.1, ratio
    elementwise = (chunked.double() + 1e-30) / (whole.double() + 1e-30)
    assert float(elementwise.median()) == pytest.approx(1.0, abs=0.15)
    # And it is deterministic: measured again from the same seed, bit for bit.
    assert torch.equal(_deferred_sensitivity(chunked_role, chunked_case), chunked)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("budget", "chunk_rows"),
    [(SMALL, 5), ("3000", 1)],  # a row alone against its chunk; two rows where chunks are one
    ids=["rows", "one_row_chunks"],
)
def test_rows_that_mix_only_on_a_later_case_are_caught_there(
    reference_roles, monkeypatch, device, budget, chunk_rows
):
    monkeypatch.setenv("KBV_TRUTH_CHUNK_BYTES", budget)
    role = reference_roles(MIXES_ON_SOME_DATA, device)
    first = _case(role)  # torch.rand: no negative part, the probe sees rows apart
    assert first.figures["truth_chunks"] > 1, first.figures
    assert first.figures["truth_rows"]["chunk_rows"] == chunk_rows
    later = _case(role, "h2_mixed_sign", 0)
    assert later.figures["truth_chunks"] == 1
    assert "mixes rows on this case" in later.figures["truth_rows_note"]
    torch.testing.assert_close(
        later.judged[0], _whole_float64(role, later)[0], rtol=1e-12, atol=1e-15
    )
    assert role._row_plan is None  # and every later run of the session goes whole
    assert _case(role, "h3_wide_range", 0).figures["truth_chunks"] == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_triangular_matmul_keeps_one_run(reference_roles, small_chunks, device):
    role = reference_roles(TRIANGULAR_MATMUL, device)
    case = _case(role)
    assert case.figures["truth_chunks"] == 1
    assert "the forward mixes rows" in case.figures["truth_rows_note"]
    a, b = case.inputs.as_list()
    torch.testing.assert_close(case.judged[0], torch.tril(a.double() @ b.double()))


def test_a_first_case_whose_rows_show_nothing_chunks_nothing(reference_roles, small_chunks):
    role = reference_roles(ZERO_ON_THE_FIRST_CASE)
    case = _case(role)
    assert case.figures["truth_chunks"] == 1
    assert "cannot show" in case.figures["truth_rows_note"], case.figures["truth_rows_note"]


def test_a_model_built_anew_for_float64_has_its_rows_shown_again(reference_roles, monkeypatch):
    # minGPT's lambda over its submodules: a deep copy keeps calling the float32 submodule, so
    # the copy's probe fails like its whole run; the model is built anew and probed again.
    monkeypatch.setenv("KBV_TRUTH_CHUNK_BYTES", "0")
    whole = _case(reference_roles(CAPTURED_SUBMODULE))
    monkeypatch.setenv("KBV_TRUTH_CHUNK_BYTES", "4096")  # 16 rows of 1 KiB: chunks of 2
    role = reference_roles(CAPTURED_SUBMODULE)
    case = _case(role)
    assert role._model64_kind == "constructed"
    assert case.figures["truth"] == "float64" and case.figures["truth_chunks"] > 1, case.figures
    torch.testing.assert_close(case.judged[0], whole.judged[0], rtol=1e-12, atol=1e-15)


def test_out_of_memory_in_the_probe_is_a_shortage_and_the_rows_are_shown_again(
    reference_roles, small_chunks, monkeypatch
):
    role = reference_roles(ROWWISE)
    real = role._forward64
    calls = []

    def short_once(inputs64):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 12.00 GiB")
        return real(inputs64)

    monkeypatch.setattr(role, "_forward64", short_once)
    case = _case(role)
    assert case.figures["truth"] == "float64" and case.figures["truth_chunks"] > 1, case.figures
    assert len(calls) > 2  # the probe ran again after the cases were let go


def test_a_run_in_chunks_that_fails_on_one_case_sends_that_case_whole(
    reference_roles, small_chunks, monkeypatch
):
    role = reference_roles(ROWWISE)
    first = _case(role)
    assert first.figures["truth_chunks"] > 1
    real = row_chunks.run_into

    def fails(*args, **kwargs):
        raise ValueError("a chunk this case's data breaks")

    monkeypatch.setattr(row_chunks, "run_into", fails)
    broken = _case(role, "h2_mixed_sign", 0)
    assert broken.figures["truth_chunks"] == 1
    assert "failed on this case" in broken.figures["truth_rows_note"]
    torch.testing.assert_close(
        broken.judged[0], _whole_float64(role, broken)[0], rtol=1e-13, atol=0
    )
    monkeypatch.setattr(row_chunks, "run_into", real)
    assert _case(role, "h3_wide_range", 0).figures["truth_chunks"] > 1  # the plan stayed


def test_integer_inputs_pass_whole():
    x = torch.zeros(1000, 256)
    index = torch.zeros(1000, dtype=torch.int64)  # an index into the batch, say
    plan, _ = row_chunks.candidate_plan([x, index], [torch.zeros(1000, 8)], budget=40 * 1024)
    assert plan is not None and plan.split == (0,)
    assert plan.holds_for([x, index]) and not plan.holds_for([x[:10], index])


def test_every_output_is_gathered_from_the_chunks(reference_roles, small_chunks):
    role = reference_roles(TWO_OUTPUTS)
    case = _case(role)
    assert case.figures["truth_chunks"] > 1, case.figures
    assert len(case.judged) == 2 and case.judged[1].shape == (96,)
    for got, want in zip(case.judged, _whole_float64(role, case), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)
