"""The deferred sensitivity (docs/protocol.md "Correctness"), on the CPU, through the reference
worker's own commands: a case whose TF32 baseline is within the floor of its budget is drawn
without the sensitivity's two float64 runs; a candidate output within the floor is judged
against the floor alone (the same verdict: the budget is max(floor, K * s_i)); one that is not
gets the sensitivity measured then, from a private draw of the case, equal bit for bit to the
one measured at the draw, so the verdict is the one an eager measurement gives. Where the
baseline itself is over the floor the sensitivity is measured at the draw, as before; so it is
where the draw cannot be repeated. Beside it: only the baselines a protocol reads are drawn, and
a kept case whose state a candidate's thread changed is drawn again. Each test
runs on the CPU and, where kbv_native has CUDA and a GPU is present, on the GPU (the private
draw and the checksums on the device)."""

from __future__ import annotations

import pytest
import torch  # before kbv_native: the module must share torch's CUDA runtime
from conftest import (
    CANCELLING_MATMUL,
    close_reference_role,
    import_native_or_skip_module,
    reference_role,
)

kn = import_native_or_skip_module()

from kbv import reference  # noqa: E402

GPU = bool(getattr(kn, "has_cuda", False)) and torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not GPU, reason="no GPU or no CUDA build")),
]

K = 16.0  # check::Policy::sens_multiplier
POLICY = {  # check::Policy for `verified` (version 4)
    "kind": "scaled",
    "norm_floor": 1e-3,
    "elem_floor": 1e-2,
    "baseline_multiplier": 4.0,
    "sens_multiplier": K,
    "sens_norm_multiplier": 1.5,
    "admit_reference_excess": True,
}
SECRET = "deferred-sensitivity-test-secret"


# Parameters redrawn per case (h2_mixed_sign): drawing case B leaves B's state in the model, so
# a private draw of case A must follow the construction's moments, not what the model holds.
WITH_STATE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(128, 48)
        self.norm = nn.LayerNorm(48)

    def forward(self, x):
        return self.norm(self.linear(x))


def get_inputs():
    return [torch.randn(32, 128)]


def get_init_inputs():
    return []
"""


ROLES: list[reference.ReferenceRole] = []


@pytest.fixture(autouse=True)
def _close_roles():
    """Every shared arena a test's roles made is closed after it."""
    yield
    while ROLES:
        close_reference_role(ROLES.pop())


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def _role(tmp_path, device: str, source: str, policy: dict | None = POLICY):
    role = reference_role(tmp_path, device, source, policy=policy)  # every case kept
    ROLES.append(role)
    return role


def _prepare(role, family: str, draw: int = 0, redraw=()) -> reference.Case:
    case_id = f"{family}-{draw}"
    figures = role.cmd_prepare_case(
        {"id": case_id, "family": family, "draw": draw, "redraw": list(redraw), "secret": SECRET}
    )
    case = role.cases[case_id]
    assert figures["sensitivity"] == reference._sensitivity_state(case.sensitivity)
    return case


def _spec(truth: torch.Tensor) -> dict:
    """The pass check::plan_candidate_pass plans for a float32 output judged by its truth."""
    scale = float(truth.square().mean().sqrt())
    return {
        "threshold": float(torch.finfo(torch.float32).max),
        "scale": scale,
        "tol_abs": POLICY["elem_floor"] * scale,
        "tol_rel": POLICY["elem_floor"],
        "nan_equal": True,
        "sens": K,
    }


def _judge(
    role,
    case: reference.Case | None,
    output: torch.Tensor,
    timing: int = 0,
    norm_budget: float | None = None,
) -> dict:
    """The reference's judge of `output` written into the candidate's slot, for case `case`
    (None: for timing set `timing`); `norm_budget` as check::passes_of sends it."""
    role.cmd_share_slot({"outputs": [{"shape": list(output.shape), "dtype": "float32"}]})
    role.slot.as_list()[0].copy_(output)
    truth = case.judged[0] if case is not None else role.timing_judged[timing][0]
    which = {"id": case.figures["id"]} if case is not None else {"timing": timing}
    judge_pass = {"index": 0, "spec": _spec(truth)}
    if norm_budget is not None:
        judge_pass["norm_budget"] = norm_budget
    answer = role.cmd_judge({**which, "passes": [judge_pass]})
    return answer["outputs"][0] | {"inputs_mutated": answer["inputs_mutated"]}


def _floor(truth: torch.Tensor) -> torch.Tensor:
    scale = float(truth.square().mean().sqrt())
    return POLICY["elem_floor"] * (truth.abs() + scale)


def test_a_baseline_within_the_floor_defers_and_the_floor_judges_what_it_can(tmp_path, device):
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    assert case.sensitivity == [reference.DEFERRED]
    assert case.figures["sensitivity"] == "deferred"
    # The memory plan still counts it: it becomes resident when a candidate needs it.
    assert case.figures["bytes"]["sensitivity"] == 4 * case.judged[0].numel()
    truth = case.judged[0]
    judged = _judge(role, case, truth.float())
    assert judged["budget"] == "floor"
    assert judged["measurement"]["figures"]["elements_over"] == 0
    assert case.sensitivity == [reference.DEFERRED]  # nothing measured: nothing needed it


def test_over_the_floor_the_sensitivity_is_measured_then_and_equals_the_eager_one(tmp_path, device):
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    truth = case.judged[0]
    floor = _floor(truth)
    # An honest-looking rounding error: twice the floor on one element, where terms cancel.
    honest = truth.clone()
    honest.view(-1)[5] += 2 * float(floor.view(-1)[5])
    judged = _judge(role, case, honest.float())
    assert judged["budget"] == "sensitivity measured for this output"
    assert judged["measurement"]["figures"]["elements_over"] == 0, judged
    deferred = case.sensitivity[0]
    assert torch.is_tensor(deferred)
    assert case.figures["sensitivity"] == "measured for a candidate over the floor"
    assert float(K * deferred.view(-1)[5]) > 2 * float(floor.view(-1)[5])

    # The same case drawn by a role that measures at the draw (no policy: nothing to defer
    # on): the same sensitivity, bit for bit, from the same secret.
    eager_role = _role(tmp_path, device, CANCELLING_MATMUL, policy=None)
    eager = _prepare(eager_role, "h1_native")
    assert eager.figures["sensitivity"] == "measured"
    assert torch.equal(eager.judged[0], truth)
    assert torch.equal(eager.sensitivity[0], deferred)

    # A second candidate reuses what the first one made resident.
    wrong = truth.clone()
    wrong.view(-1)[5] += 4 * K * float(deferred.view(-1)[5]) + 1.0
    judged = _judge(role, case, wrong.float())
    assert "budget" not in judged  # measured already: judged as at a draw that measured it
    assert judged["measurement"]["figures"]["elements_over"] == 1
    assert case.sensitivity[0] is deferred


def test_normwise_over_its_budget_within_the_floor_measures_the_sensitivity(tmp_path, device):
    """Protocol version 4: the normwise budget is opened by ||s|| / ||t||, so an output within
    the elementwise floor everywhere but over the normwise budget the pass was planned with
    needs the sensitivity too (an honest TF32 convolution on the H100: 1.28e-3 against 1e-3)."""
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    truth = case.judged[0]
    # Every element off by a third of its floor: within it, normwise far over 1e-3.
    spread = truth + _floor(truth) / 3
    plain = _judge(role, case, spread.float())  # a request without the normwise budget
    assert plain["budget"] == "floor"
    assert plain["measurement"]["figures"]["elements_over"] == 0
    assert float(plain["measurement"]["figures"]["normwise_rel"]) > 1e-3
    assert plain["measurement"]["figures"]["sensitivity_normwise"] == 0  # none read
    assert case.sensitivity == [reference.DEFERRED]

    judged = _judge(role, case, spread.float(), norm_budget=1e-3)
    assert judged["budget"] == "sensitivity measured for this output"
    s = case.sensitivity[0]
    assert torch.is_tensor(s)
    expected = float(s.double().norm() / truth.double().norm())
    got = float(judged["measurement"]["figures"]["sensitivity_normwise"])
    assert expected > 0 and got == pytest.approx(expected, rel=1e-6)

    # Within the normwise budget: the floor's figures stand, nothing more is measured.
    other = _role(tmp_path, device, CANCELLING_MATMUL)
    other_case = _prepare(other, "h1_native")
    within = _judge(other, other_case, truth.float(), norm_budget=1e-3)
    assert within["budget"] == "floor"
    assert other_case.sensitivity == [reference.DEFERRED]


def test_the_private_draw_ignores_what_a_candidate_wrote_into_the_shared_inputs(tmp_path, device):
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    truth = case.judged[0]
    x = case.inputs.as_list()[0]
    kept = x.clone()
    # A candidate's thread scales the shared input while the judge runs: the sensitivity from
    # those values would open every budget. It is measured from a private draw instead.
    x.mul_(1e6)
    honest = truth.clone()
    honest.view(-1)[5] += 2 * float(_floor(truth).view(-1)[5])
    judged = _judge(role, case, honest.float())
    assert judged["inputs_mutated"], "the write is still the candidate's inputs_mutated"
    eager = _prepare(_role(tmp_path, device, CANCELLING_MATMUL, policy=None), "h1_native")
    assert torch.equal(case.sensitivity[0], eager.sensitivity[0])
    x.copy_(kept)


def test_a_case_drawn_again_after_another_has_the_same_state(tmp_path, device):
    role = _role(tmp_path, device, WITH_STATE)
    names = list(role.initial_state)
    a = _prepare(role, "h2_mixed_sign", 0, names)
    _prepare(role, "h2_mixed_sign", 1, names)  # the model now holds draw 1's state
    assert a.sensitivity[0] is reference.DEFERRED
    block, state = role._draw_again(a)  # checked against a's checksums, else internal_error
    assert torch.equal(block.as_list()[0], a.inputs.as_list()[0])
    assert all(torch.equal(state[k], v) for k, v in a.state.as_dict().items())
    block.close()
    truth = a.judged[0]
    over = truth.clone()
    over.view(-1)[0] += 2 * float(_floor(truth).view(-1)[0])
    judged = _judge(role, a, over.float())  # measured from the private draw, without error
    assert judged["budget"] == "sensitivity measured for this output"


def test_a_case_that_cannot_be_drawn_again_is_the_harness_s_error(tmp_path, device):
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    case.checksums = {key: value + 1 for key, value in case.checksums.items()}
    with pytest.raises(reference.WorkerError, match="not bit for bit") as error:
        role._draw_again(case)
    assert error.value.kind == "internal_error"


@pytest.mark.parametrize("keep, variants", [("truth", {"tf32"}), ("fp32", {"tf32", "fp32"})])
def test_a_draw_makes_only_the_baselines_its_protocol_reads(tmp_path, device, keep, variants):
    # Plain FP32 is a third forward of every case on a GPU: drawn only where the protocol judges
    # by it (`standard`); `verified` and `kbv-paper` read the TF32 baseline's figures alone.
    role = _role(tmp_path, device, WITH_STATE)
    role.keep = keep
    case = _prepare(role, "h1_native")
    assert set(case.figures["baselines"]) == variants
    assert "fp32" in case.figures["draw_phases_s"] or keep != "fp32"


def test_an_output_that_changes_while_it_is_judged_keeps_the_floor_s_verdict(tmp_path, device):
    # Over the floor at the judge's first reading, right by the time its copy is made (a thread
    # or stream the candidate left running finishing the work late): the copy does not match
    # what was measured and checksummed, so the floor's figures stand and it fails.
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    truth = case.judged[0]
    garbage = truth.clone()
    garbage.view(-1)[:16] += 1e3
    copy_first = role._with_room

    def late_write(make):
        role.slot.as_list()[0].copy_(truth.float())  # the right values, written too late
        return copy_first(make)

    role._with_room = late_write
    judged = _judge(role, case, garbage.float())
    role._with_room = copy_first
    assert judged["budget"] == "floor: the output changed while it was judged"
    assert judged["measurement"]["figures"]["elements_over"] >= 16
    assert case.sensitivity == [reference.DEFERRED]  # nothing was measured for it


IN_PLACE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu_(x) * 2


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
"""

UNSEEDED = """
import random

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 3


def get_inputs():
    return [torch.randn(64, 128) + random.random()]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("source", [IN_PLACE, UNSEEDED], ids=["in_place_forward", "unseeded"])
def test_a_draw_that_cannot_be_repeated_measures_the_sensitivity_at_once(tmp_path, device, source):
    # A forward that changes its inputs, or a get_inputs beside torch's seeds: a private draw
    # would not be the case, so nothing is deferred (as before deferral), and no candidate over
    # the floor meets an internal error later.
    role = _role(tmp_path, device, source)
    case = _prepare(role, "h2_mixed_sign")
    assert torch.is_tensor(case.sensitivity[0]) and case.figures["sensitivity"] == "measured"
    assert case.recipe == {}
    truth = case.judged[0]
    over = truth.clone()
    over.view(-1)[0] += 2 * float(_floor(truth).view(-1)[0])
    judged = _judge(role, case, over.float())
    assert "budget" not in judged and judged["measurement"]["figures"]["elements_over"] == 1


def test_a_kept_case_whose_state_a_candidate_changed_is_drawn_again(tmp_path, device):
    # The state blocks are mapped writable in the candidate's process and loaded by the next
    # candidate: one a lingering thread changed is not reused (nor the shared initial block).
    role = _role(tmp_path, device, WITH_STATE)
    names = list(role.initial_state)
    request = {"family": "h2_mixed_sign", "draw": 0, "redraw": names, "secret": SECRET}
    role.cmd_prepare_case({"id": "h2_mixed_sign-0", **request})
    case = role.cases["h2_mixed_sign-0"]
    assert role.cmd_prepare_case({"id": "h2_mixed_sign-0", **request})["cached"]
    next(iter(case.state.as_dict().values())).view(-1)[0] += 1.0
    again = role.cmd_prepare_case({"id": "h2_mixed_sign-0", **request})
    assert not again["cached"]  # drawn again, from the secret: the same values as before
    assert role.cases["h2_mixed_sign-0"].checksums == case.checksums

    native = {"family": "native", "draw": 0, "redraw": [], "secret": SECRET}
    role.cmd_prepare_case({"id": "native-0", **native})
    shared_initial = role.initial_block
    assert role.cases["native-0"].state is shared_initial
    next(iter(shared_initial.as_dict().values())).view(-1)[0] += 1.0
    again = role.cmd_prepare_case({"id": "native-0", **native})
    assert not again["cached"]
    fresh = role.cases["native-0"].state
    assert fresh is role.initial_block and fresh is not shared_initial
    assert all(torch.equal(fresh.as_dict()[k], v) for k, v in role.initial_state.items())


# An in-place forward whose redrawn parameter puts the case's own baseline over the floor (its
# sensitivity measured at the draw) while its timing set, under the initial state, is within it.
IN_PLACE_WITH_OFFSET = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Parameter(torch.zeros(1, 128))

    def forward(self, x):
        torch.relu_(x)
        return (x + self.c * 1e7) - self.c * 1e7


def get_inputs():
    return [torch.randn(32, 128)]


def get_init_inputs():
    return []
"""


def test_a_timing_set_of_a_case_that_cannot_be_drawn_again_is_not_deferred(tmp_path, device):
    role = _role(tmp_path, device, IN_PLACE_WITH_OFFSET)
    case = _prepare(role, "h2_mixed_sign", 0, ["c"])
    assert case.recipe == {}  # its forward changed its inputs: no private draw would match
    role.cmd_prepare_timing_sets({"ids": [case.figures["id"]]})
    assert reference._sensitivity_state(role.timing_sensitivity[0]) == "measured"
    truth = role.timing_judged[0][0]
    out = truth.clone()
    out.view(-1)[0] += 1.0 + abs(float(truth.view(-1)[0]))
    judged = _judge(role, None, out.float(), timing=0)
    assert judged["measurement"]["figures"]["elements_over"] == 1


TRANSPOSED_WEIGHT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(32, 128).t())  # a non-contiguous parameter

    def forward(self, x):
        return (x.double() @ self.w.double()).to(x.dtype)


def get_inputs():
    return [torch.randn(16, 128)]


def get_init_inputs():
    return []
"""


def test_a_non_contiguous_parameter_does_not_turn_deferral_off(tmp_path, device):
    role = _role(tmp_path, device, TRANSPOSED_WEIGHT)
    case = _prepare(role, "h2_mixed_sign", 0, ["w"])
    assert case.figures["sensitivity"] == "deferred" and case.recipe


# A timing set is a case's inputs run under the initial state. Where the case was drawn under
# that very state, its outputs are the timing set's: not computed a second time.
IN_PLACE_SCALE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mul_(3.0)


def get_inputs():
    return [torch.randn(32, 128)]


def get_init_inputs():
    return []
"""


def _count_forward_runs(role, monkeypatch) -> list:
    runs: list = []
    original = role._run_variants

    def counted(*args, **kwargs):
        runs.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(role, "_run_variants", counted)
    return runs


@pytest.mark.parametrize(
    "source, family",
    [
        (CANCELLING_MATMUL, "h1_native"),  # no parameters: every case is under the initial state
        (WITH_STATE, "native"),  # the native family keeps the initial state
        (WITH_STATE, "h1_native"),  # nothing named to redraw: the initial values, copied
    ],
)
def test_a_timing_set_of_a_case_under_the_initial_state_is_the_case_s_outputs(
    tmp_path, device, monkeypatch, source, family
):
    role = _role(tmp_path, device, source)
    case = _prepare(role, family, 0, [])
    runs = _count_forward_runs(role, monkeypatch)
    answer = role.cmd_prepare_timing_sets({"ids": [case.figures["id"]]})
    assert runs == []  # no forward ran again
    assert role.timing_judged[0] is case.judged
    assert answer["golden"][0]["baselines"] == case.figures["baselines"]
    assert answer["golden"][0]["truth"] == case.figures["truth"]
    # What the forwards would have given, bit for bit (the model holds the initial state now).
    monkeypatch.undo()
    again = role._run_variants(case.inputs.as_list(), sensitivity_seed=case.sensitivity_seed)
    assert all(torch.equal(a, b) for a, b in zip(again["judged"], case.judged, strict=True))
    # A timed output is judged against them: right passes, wrong fails.
    truth = case.judged[0]
    assert (
        _judge(role, None, truth.float(), timing=0)["measurement"]["figures"]["elements_over"] == 0
    )
    # (Far off: on the GPU the cancelling matmul's budget is TF32's, its sensitivity measured at
    # the draw, wide where the terms cancel; 1 + |t| passed there, on the H100 of session 19.)
    wrong = truth.clone()
    scale = float(truth.double().square().mean().sqrt())
    wrong.view(-1)[3] += 1e3 * (1.0 + scale + abs(float(truth.view(-1)[3])))
    assert _judge(role, None, wrong.float(), timing=0)["measurement"]["figures"]["elements_over"]


def test_a_timing_set_of_a_case_with_redrawn_parameters_is_computed(tmp_path, device, monkeypatch):
    role = _role(tmp_path, device, WITH_STATE)
    case = _prepare(role, "h1_native", 0, list(role.initial_state))
    runs = _count_forward_runs(role, monkeypatch)
    role.cmd_prepare_timing_sets({"ids": [case.figures["id"]]})
    assert runs == [1]
    # Under the initial state, not the case's redrawn one: other outputs.
    assert not torch.equal(role.timing_judged[0][0], case.judged[0])


def test_a_computed_timing_set_gives_its_runs_memory_back(tmp_path, device, monkeypatch):
    # The candidate is timed beside this worker: the float64 run's intermediates must not stay
    # in torch's cache meanwhile (on the GPU, the device memory the candidate's forward needs).
    role = _role(tmp_path, device, WITH_STATE)
    case = _prepare(role, "h1_native", 0, list(role.initial_state))
    runs = _count_forward_runs(role, monkeypatch)
    release = reference._release_cached
    runs_before_release: list[int] = []  # the runs done by each release

    def released(dev):
        runs_before_release.append(len(runs))
        release(dev)

    monkeypatch.setattr(reference, "_release_cached", released)
    role.cmd_prepare_timing_sets({"ids": [case.figures["id"]]})
    assert runs == [1]
    # A release came after the run, and nothing ran after the last one.
    assert runs_before_release and runs_before_release[-1] == len(runs)
    if device == "cuda":
        # Nothing of the runs is cached: what torch reserves is what is in use, within a
        # segment's rounding.
        assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() < 64 << 20


def test_a_timing_set_of_a_case_whose_forward_changed_its_inputs_is_computed(
    tmp_path, device, monkeypatch
):
    # The forward scales its input in place: the case's outputs are of the values as drawn, the
    # block now holds them scaled (the timing set's inputs, as before this reuse).
    role = _role(tmp_path, device, IN_PLACE_SCALE)
    case = _prepare(role, "h1_native")
    assert not case.forwards_pure
    runs = _count_forward_runs(role, monkeypatch)
    role.cmd_prepare_timing_sets({"ids": [case.figures["id"]]})
    assert runs == [1]


def _ask(role, case: reference.Case, output: torch.Tensor, **request) -> dict:
    """The judge's whole answer for `output` in the slot, with extra request fields."""
    role.cmd_share_slot({"outputs": [{"shape": list(output.shape), "dtype": "float32"}]})
    role.slot.as_list()[0].copy_(output)
    return role.cmd_judge(_judge_request(case) | request)


def _judge_request(case: reference.Case, seq: int = 2) -> dict:
    passes = [{"index": 0, "spec": _spec(case.judged[0])}]
    return {"id": case.figures["id"], "passes": passes, "seq": seq}


def _no_room(call, request: dict):
    # (Each request the harness sends has its own sequence number, the one sent again too.)
    with pytest.raises(reference.WorkerError) as raised:
        call(request | {"sensitivity_room": False, "seq": 1})
    assert raised.value.kind == "sensitivity_room"


def test_the_draw_reports_the_deferred_runs_peak_apart_from_its_own(tmp_path, device):
    # The memory plan reserves the draw's peak for every evaluation, and the deferred runs'
    # estimated peak only when they are needed (WorkerExchange::reference). (On the CPU the
    # device peaks read 0: the GPU twin is the one that compares two measured peaks.)
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    deferred = _prepare(role, "h1_native").figures["bytes"]
    truth_bytes = 8 * 64 * 32  # float64 [64, 32]
    assert deferred["sensitivity_peak"] >= 2 * truth_bytes
    assert deferred["sensitivity_peak"] > deferred["draw_peak"]
    # Nothing deferred (no policy to defer by): nothing apart, the draw's peak is all.
    eager = _prepare(_role(tmp_path, device, CANCELLING_MATMUL, policy=None), "h1_native")
    assert eager.figures["bytes"]["sensitivity_peak"] == 0


def test_without_room_a_judge_stops_before_the_runs_and_measures_when_sent_again(tmp_path, device):
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    truth = case.judged[0]
    # Within the floor: judged at once, room or not.
    within = _ask(role, case, truth.float(), sensitivity_room=False)
    assert within["outputs"][0]["budget"] == "floor"
    # Over it: no float64 run is made without room.
    over = truth.clone()
    over.view(-1)[5] += 2 * float(_floor(truth).view(-1)[5])
    role.slot.as_list()[0].copy_(over.float())
    _no_room(role.cmd_judge, _judge_request(case))
    assert case.sensitivity == [reference.DEFERRED]
    # The same request once room was made: judged by the full budget, as if never stopped.
    again = role.cmd_judge(_judge_request(case))
    assert again["outputs"][0]["budget"] == "sensitivity measured for this output"
    assert again["outputs"][0]["measurement"]["figures"]["elements_over"] == 0
    assert torch.is_tensor(case.sensitivity[0])


@pytest.mark.parametrize("later", ["right", "other_garbage"])
def test_an_output_changed_while_room_was_made_keeps_its_first_measure(tmp_path, device, later):
    # Garbage at the first reading; by the request sent again (after the harness waited for
    # memory), the right values, or other garbage (a thread the candidate left running): the
    # first measure stands, over the floor, and no run is made for it.
    role = _role(tmp_path, device, CANCELLING_MATMUL)
    case = _prepare(role, "h1_native")
    truth = case.judged[0]
    garbage = truth.clone()
    garbage.view(-1)[:16] += 1e3
    role.cmd_share_slot({"outputs": [{"shape": list(truth.shape), "dtype": "float32"}]})
    role.slot.as_list()[0].copy_(garbage.float())
    _no_room(role.cmd_judge, _judge_request(case))
    replacement = truth.clone()
    if later == "other_garbage":
        replacement.view(-1)[100:101] += 1e3
    role.slot.as_list()[0].copy_(replacement.float())
    again = role.cmd_judge(_judge_request(case))
    judged = again["outputs"][0]
    assert judged["budget"] == "floor: the output changed while it was judged"
    assert judged["measurement"]["figures"]["elements_over"] >= 16
    assert case.sensitivity == [reference.DEFERRED]
    # Anything else sent in between (another candidate's turn) ends what was kept.
    role.slot.as_list()[0].copy_(garbage.float())
    _no_room(role.cmd_judge, _judge_request(case))
    role.before_command("share_slot")
    role.slot.as_list()[0].copy_(truth.float())
    assert role.cmd_judge(_judge_request(case))["outputs"][0]["budget"] == "floor"


def test_without_room_a_draw_measured_at_once_keeps_nothing(tmp_path, device):
    # A forward that changes its inputs cannot be drawn again, so its sensitivity is measured at
    # the draw; without room the draw stops, keeps nothing, and is made when sent again.
    role = _role(tmp_path, device, IN_PLACE)
    request = {
        "id": "h1_native-0",
        "family": "h1_native",
        "draw": 0,
        "redraw": [],
        "secret": SECRET,
    }
    _no_room(role.cmd_prepare_case, request)
    assert "h1_native-0" not in role.cases
    role.cmd_prepare_case(request)
    figures = role.cases["h1_native-0"].figures
    assert figures["sensitivity"] == "measured"
    assert figures["bytes"]["sensitivity_peak"] == 0  # nothing left for later: no room to ask


def test_without_room_timing_sets_let_go_of_what_they_pinned(tmp_path, device):
    role = _role(tmp_path, device, WITH_STATE)
    names = list(role.initial_state)
    role.cmd_prepare_case(
        {"id": "h2-0", "family": "h2_mixed_sign", "draw": 0, "redraw": names, "secret": SECRET}
    )
    case = role.cases["h2-0"]
    # Its timing set runs under the initial state, not the case's: computed, and its
    # sensitivity with it where the case's recipe cannot be trusted to draw it again.
    case.recipe = {}
    _no_room(role.cmd_prepare_timing_sets, {"ids": ["h2-0"]})
    assert case.pins == 0
    role.cmd_prepare_timing_sets({"ids": ["h2-0"]})
    assert case.pins == 1
