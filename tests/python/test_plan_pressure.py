"""Library plans chosen under memory pressure (kbv.plan_pressure): an out-of-memory event a forward
did not raise was swallowed by a library choosing a plan (cuDNN's v8 API keeps the fallback for
the process), and the reference refuses to time a baseline whose mode saw one, in words the
orchestrator reads as the reference running out of device memory (a harness fault, retried with
the device to itself). Torch's allocator calls the observer on a GPU; here its events are made by
calling the observer as torch would."""

from __future__ import annotations

import textwrap

import pytest
import torch  # before kbv_native: the module must share torch's CUDA runtime
from conftest import import_native_or_skip_module

import_native_or_skip_module()

from kbv import hosting, plan_pressure, reference, worker  # noqa: E402
from kbv.loading import WorkerError  # noqa: E402

CONV = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(4, 4, 3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_init_inputs():
    return []
"""
CASE = {"id": "native-0", "family": "native", "draw": 0, "redraw": [], "secret": "plans"}


def _allocator_runs_out(nbytes: int = 3 << 30, free: int = 1 << 30) -> None:
    """What torch's caching allocator does before it raises OutOfMemoryError."""
    plan_pressure._observe(0, nbytes, 80 << 30, free)


def test_a_forward_without_out_of_memory_events_is_not_pressured():
    watch = plan_pressure.Watch(torch.device("cpu"))
    with watch.forward("tf32", "drawing a case"):
        pass
    assert watch.pressured == {} and watch.words("tf32") is None


def test_an_event_the_forward_swallowed_marks_its_mode_only():
    watch = plan_pressure.Watch(torch.device("cpu"))
    with watch.forward("tf32", "drawing a case"):
        _allocator_runs_out()  # a plan's workspace, caught by the library, which goes on
    with watch.forward("fp32", "timing the baseline"):
        pass
    assert set(watch.pressured) == {"tf32"}
    seen = watch.pressured["tf32"]
    assert seen["where"] == "drawing a case" and seen["events"] == 1
    assert seen["bytes"] == 3 << 30 and seen["free_bytes"] == 1 << 30
    words = watch.words("tf32")
    assert "3.00 GiB" in words and "1.00 GiB free" in words and "TF32" in words
    assert watch.words("fp32") is None


def test_the_out_of_memory_a_forward_raises_is_the_callers_not_a_plan():
    """kbv's own evicting retry (_with_room) handles a raised out-of-memory; only events beyond
    the raised one say a library swallowed one first."""
    watch = plan_pressure.Watch(torch.device("cpu"))
    with pytest.raises(WorkerError):
        with watch.forward("tf32", "drawing a case"):
            _allocator_runs_out()
            # hosting.forward's wrapping: the runtime error raised from torch's
            raise WorkerError("runtime_error", "forward raised") from torch.OutOfMemoryError("x")
    assert watch.pressured == {}
    with pytest.raises(torch.OutOfMemoryError):
        with watch.forward("tf32", "drawing a case"):
            _allocator_runs_out()  # a convolution's plan, swallowed
            _allocator_runs_out()  # then an allocation the forward raised
            raise torch.OutOfMemoryError("y")
    assert watch.pressured["tf32"]["events"] == 1
    # Another failure (not out of memory) after a swallowed event: the plan stays chosen.
    other = plan_pressure.Watch(torch.device("cpu"))
    with pytest.raises(ValueError):
        with other.forward("fp32", "timing the baseline"):
            _allocator_runs_out()
            raise ValueError("the problem's own")
    assert set(other.pressured) == {"fp32"}


def test_nothing_is_attached_on_the_host():
    assert plan_pressure.attach(torch.device("cpu")) is False


def _role(tmp_path) -> reference.ReferenceRole:
    problem = tmp_path / "problem.py"
    problem.write_text(textwrap.dedent(CONV))
    role = reference.ReferenceRole()
    role.cmd_load_problem({"device": "cpu", "problem": str(problem)})
    role.cmd_set_plan({"cache_bytes": 0})
    return role


def _timing_request(variant: str) -> dict:
    return {"variant": variant, "calls": 3, "warmup": 1}


def test_the_reference_times_a_baseline_whose_plans_had_room(tmp_path):
    role = _role(tmp_path)
    role.cmd_prepare_case(CASE)
    role.cmd_prepare_timing_sets({"ids": ["native-0"]})
    assert len(role.cmd_time(_timing_request("tf32"))["samples_ms"]) == 3
    assert role.cmd_ping({})["plans_under_pressure"] == {}


def test_a_draw_whose_plan_was_chosen_under_pressure_is_refused(tmp_path, monkeypatch):
    """Refused at the draw, before any candidate runs on it, in words the orchestrator reads as
    the reference out of memory for a library's plan: retried alone (src/eval/held_memory.cpp
    weighs it against a candidate holding beyond its evaluation's plan)."""
    role = _role(tmp_path)
    real_forward = hosting.forward

    def forward_beside_a_full_device(model, inputs, device, sync=True):
        _allocator_runs_out()  # the convolution's first plan: its workspace did not fit
        return real_forward(model, inputs, device, sync)

    monkeypatch.setattr(hosting, "forward", forward_beside_a_full_device)
    with pytest.raises(WorkerError) as refused:
        role.cmd_prepare_case(CASE)
    answer = worker._with_resource({"kind": refused.value.kind}, refused.value, role)
    assert answer["resource"] == "out_of_memory" and answer["memory"] == "library_plan"
    assert "TF32 forward (drawing a case) chose a library plan" in refused.value.message
    assert not role.cases  # nothing kept of the refused draw
    # A kept session says so when pinged: the orchestrator starts a new one.
    assert set(role.cmd_ping({})["plans_under_pressure"]) == {"tf32"}
    # The baseline is not timed either, whatever asks.
    monkeypatch.setattr(hosting, "forward", real_forward)
    with pytest.raises(WorkerError):
        role.cmd_time(_timing_request("tf32"))


def test_a_plan_chosen_under_pressure_while_timing_is_refused_after_it(tmp_path, monkeypatch):
    """Where the first FP32 call comes in the timing (no pure first draw chose its plans), a
    plan chosen there for want of room (a candidate holding the device) is refused; the other
    mode is still measured, and the same mode's later figures are refused before they run."""
    role = _role(tmp_path)
    role.cmd_prepare_case(CASE)
    role.cmd_prepare_timing_sets({"ids": ["native-0"]})
    real_time_calls = reference.timing.time_calls

    def time_calls_beside_a_full_device(call, *args, **kwargs):
        _allocator_runs_out()
        return real_time_calls(call, *args, **kwargs)

    monkeypatch.setattr(reference.timing, "time_calls", time_calls_beside_a_full_device)
    with pytest.raises(WorkerError) as refused:
        role.cmd_time(_timing_request("fp32"))
    assert worker._memory_of(refused.value) == "library_plan"
    assert set(role.plans.pressured) == {"fp32"}
    assert role.plans.pressured["fp32"]["where"] == "timing the baseline"
    monkeypatch.setattr(reference.timing, "time_calls", real_time_calls)
    assert len(role.cmd_time(_timing_request("tf32"))["samples_ms"]) == 3
    with pytest.raises(WorkerError):
        role.cmd_time_secondary({"cmd": "time_secondary", "variant": "fp32", "calls": 2})
    assert role.cmd_time_secondary({"cmd": "time_secondary", "variant": "tf32", "calls": 2})


def test_a_call_watched_alone_tells_a_raised_out_of_memory_from_a_swallowed_one():
    """The kernel audit and the operator trace catch a call's failure themselves: watched call
    by call, a call that raised its out-of-memory is not taken for a library's swallowed one."""
    watch = plan_pressure.Watch(torch.device("cpu"))

    def runs_out():
        _allocator_runs_out()
        raise torch.OutOfMemoryError("the call's own allocation")

    watched = watch.call("tf32", "the baseline's kernel_audit", runs_out)
    try:
        watched()
    except torch.OutOfMemoryError:
        pass  # as kernel_audit does: reported, never a verdict
    assert watch.pressured == {}

    def swallows():
        _allocator_runs_out()  # a library caught it and chose another plan
        return 1

    assert watch.call("tf32", "the baseline's kernel_audit", swallows)() == 1
    assert watch.pressured["tf32"]["where"] == "the baseline's kernel_audit"


# A candidate whose checked forward sees what torch's allocator does when a plan's workspace
# does not fit (on the CPU nothing runs out: the forward makes the allocator's call itself).
SQUEEZED_CANDIDATE = """
import torch
import torch.nn as nn

from kbv import plan_pressure


class ModelNew(nn.Module):
    def forward(self, x):
        plan_pressure._observe(0, 3 << 30, 80 << 30, 1 << 30)
        return torch.relu(x)
"""


@pytest.mark.e2e
def test_a_candidate_whose_plan_was_squeezed_is_said_so_and_still_correct(tmp_path, run_eval):
    from conftest import PROBLEMS

    candidate = tmp_path / "squeezed.py"
    candidate.write_text(SQUEEZED_CANDIDATE)
    evaluation = run_eval(PROBLEMS / "level1" / "3_ReLU.py", candidate, "--allow-library")
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert result["verdict"] == "correct", result["reason"]
    flags = {f["id"]: f for f in result["flags"]}
    assert flags["plans_under_pressure"]["severity"] == "info"
    assert "3.00 GiB" in flags["plans_under_pressure"]["detail"]
    # `kbv eval` evaluates one candidate: nothing beside it, no retry, its figures stand.
    assert "evaluated_alone" not in flags


# -- a first forward's room (no event to see: cuDNN drops the plans over cacheInfo first) -------
class _FakeDevice(plan_pressure.DeviceMemory):
    """The device as make_room sees it: `free` of `total`, a cache that holds a block or not."""

    def __init__(self, free: int, total: int = 80 << 30, fits: bool = True) -> None:
        self.free, self.total, self.fits = free, total, fits
        self.cached: list[int] = []
        self.given_back = 0

    def free_and_total(self) -> tuple[int, int]:
        return self.free, self.total

    def cache_block(self, nbytes: int) -> None:
        if not self.fits:
            _allocator_runs_out(nbytes, self.free)  # torch's observer runs before it throws
            raise torch.OutOfMemoryError("no room")
        self.cached.append(nbytes)

    def give_back(self) -> None:
        self.given_back += 1
        self.cached.clear()


def _gpu_watch(memory, carried: list | None = None) -> plan_pressure.Watch:
    watch = plan_pressure.Watch(
        torch.device("cpu"),
        room=True,
        before_room=(lambda: carried.append("carried")) if carried is not None else None,
        memory=memory,
    )
    watch.device = torch.device("cuda", 0)  # make_room's branch for a GPU, on the fake device
    return watch


def test_a_first_forward_on_a_full_device_gets_its_room_cached_then_given_back(monkeypatch):
    monkeypatch.delenv("KBV_PLAN_ROOM_BYTES", raising=False)
    device = _FakeDevice(free=1 << 30)
    carried: list = []
    watch = _gpu_watch(device, carried)
    watch.extra_bytes = 2 << 30  # the forward's own peak takes its share of the block first
    seen_inside: list = []
    with watch.forward("tf32", "drawing a case"):
        seen_inside.append(list(device.cached))
    assert seen_inside == [[(9 << 30) + (2 << 30)]]  # held through the first forward
    assert carried == ["carried"]  # the caller's peak carried before the counters restart
    assert device.cached == [] and device.given_back == 1
    assert watch.first_calls["tf32"]["set_aside"] is True
    assert watch.pressured == {}
    # Later forwards of the mode choose nothing: no room again.
    with watch.forward("tf32", "timing the baseline"):
        assert device.cached == []
    assert device.given_back == 1 and carried == ["carried"]


def test_a_first_forward_with_room_free_sets_nothing_aside():
    device = _FakeDevice(free=40 << 30)
    watch = _gpu_watch(device)
    with watch.forward("fp32", "choosing the FP32 plans at the first draw"):
        assert device.cached == []
    assert watch.first_calls["fp32"] == {
        "where": "choosing the FP32 plans at the first draw",
        "room_bytes": 9 << 30,
        "free_bytes": 40 << 30,
        "set_aside": False,
    }
    assert device.given_back == 0 and watch.pressured == {}


def test_a_small_device_gets_an_eighth_of_it_and_the_override_wins(monkeypatch):
    monkeypatch.delenv("KBV_PLAN_ROOM_BYTES", raising=False)
    assert plan_pressure.room_bytes(16 << 30) == 2 << 30
    # The H100 (79.2 GiB) and the H200: above the largest plan KernelBench's first calls took.
    assert plan_pressure.room_bytes(int(79.18 * 2**30)) == 9 << 30
    assert plan_pressure.room_bytes(141 << 30) == 9 << 30
    assert plan_pressure.room_bytes() == 9 << 30  # a load that leaves the device untouched
    monkeypatch.setenv("KBV_PLAN_ROOM_BYTES", str(3 << 30))
    assert plan_pressure.room_bytes(141 << 30) == 3 << 30


def test_no_room_to_set_aside_is_recorded_and_the_events_stay_the_guard():
    """A session drawn ahead under its cap, a device others fill: the room is not had, the
    forward goes on as it would have, and the allocator's own event in trying (before the
    forward's window) is not a library's swallowed one. A plan the forward then cannot allocate
    is an event in its window, refused as before."""
    device = _FakeDevice(free=1 << 30, fits=False)
    watch = _gpu_watch(device)
    with watch.forward("tf32", "drawing a case"):
        pass
    assert watch.pressured == {}
    assert watch.first_calls["tf32"]["no_room"] is True
    assert watch.first_calls["tf32"]["set_aside"] is False
    assert device.given_back == 0  # nothing was set aside
    with watch.forward("fp32", "choosing the FP32 plans at the first draw"):
        _allocator_runs_out()  # the plan's workspace, swallowed by cuDNN
    with pytest.raises(WorkerError) as refused:
        watch.refuse()
    assert worker._memory_of(refused.value) == "library_plan"
    assert "FP32 forward" in refused.value.message


def test_a_candidates_first_call_is_given_no_room():
    """Its evaluation reserves none for it: a squeezed candidate is seen by the events and
    timed again alone (src/schedule/retry_alone.cpp)."""
    device = _FakeDevice(free=0)
    watch = plan_pressure.Watch(torch.device("cpu"), memory=device)
    watch.device = torch.device("cuda", 0)
    with watch.forward("forward", "a checked call"):
        pass
    assert device.cached == [] and watch.first_calls == {}


def test_the_host_sets_no_room_aside():
    device = _FakeDevice(free=0)
    watch = plan_pressure.Watch(torch.device("cpu"), memory=device)
    with watch.forward("tf32", "drawing a case"):
        pass
    assert device.cached == [] and watch.first_calls == {}


def test_the_reference_carries_its_draw_peak_and_says_where_it_had_room(tmp_path, monkeypatch):
    """The reference's first draw on a full device: room set aside for the TF32 forward (its
    meta forward's peak on top) and for the FP32 plans chosen beside it, recorded in the draw's
    figures; the load says how much room its first draw must be reserved."""
    role = _role(tmp_path)
    loaded_sizes = role.cmd_load_problem(
        {"device": "cpu", "problem": str(tmp_path / "problem.py")}
    )["sizes"]
    assert loaded_sizes["plan_room_bytes"] == 0  # the host: no library plan to make room for
    device = _FakeDevice(free=1 << 30)
    carried: list = []
    role.plans = _gpu_watch(device, carried)
    role.plans.extra_bytes = 1 << 20
    monkeypatch.setattr(reference.ReferenceRole, "_choose_fp32_plans", _fp32_forward_watched)
    role.cmd_set_plan({"cache_bytes": 0})
    figures = role.cmd_prepare_case(CASE)
    rooms = figures["plan_rooms"]
    assert set(rooms) == {"tf32", "fp32"}
    assert rooms["tf32"]["where"] == "drawing a case" and rooms["tf32"]["set_aside"] is True
    assert rooms["tf32"]["room_bytes"] == (9 << 30) + (1 << 20)
    assert device.given_back == 2 and len(carried) == 2
    # The next draw chooses no plan: no room, no record.
    second = role.cmd_prepare_case(CASE | {"id": "native-1", "draw": 1})
    assert "plan_rooms" not in second and device.given_back == 2


def _fp32_forward_watched(self, inputs):
    """_choose_fp32_plans as on a GPU (the host skips it): the FP32 forward, watched."""
    self._fp32_plans_chosen = True
    with self.plans.forward("fp32", "choosing the FP32 plans at the first draw"):
        hosting.forward(self.model, inputs, self.device)


def test_the_meta_forward_counts_convolutions(tmp_path):
    role = _role(tmp_path)
    template = role._shape_template()
    assert role._meta_forward(template)["convolutions"] == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a visible GPU")
def test_on_a_gpu_room_is_cached_for_the_first_call_and_its_want_recorded(monkeypatch):
    """The GPU twin: with the device filled but for 256 MiB, a first forward gets its room from
    the process's own cache (the allocator gives it back after), and with nothing cached the
    want of room is recorded."""
    monkeypatch.setenv("KBV_PLAN_ROOM_BYTES", str(1 << 30))
    device = torch.device("cuda")
    conv = torch.nn.Conv2d(8, 8, 3).to(device)
    x = torch.randn(4, 8, 64, 64, device=device)
    filler = []
    torch.cuda.empty_cache()
    # (1 GiB steps while 3.25 GiB stay free: the 2 GiB block below always fits; session 38's
    # H100 run of this twin stepped down to 1.66 GiB and failed here, before any Watch.)
    while torch.cuda.mem_get_info(device)[0] > (256 << 20) + (3 << 30):
        filler.append(torch.empty(1 << 30, dtype=torch.uint8, device=device))
    filler.append(torch.empty(2 << 30, dtype=torch.uint8, device=device))
    try:
        del filler[-1]  # 2 GiB in this process's cache, under 2.3 GiB free on the device
        while torch.cuda.mem_get_info(device)[0] > 256 << 20:
            filler.append(torch.empty(64 << 20, dtype=torch.uint8, device=device))
        watch = plan_pressure.Watch(device, room=True)
        with torch.no_grad(), watch.forward("tf32", "drawing a case"):
            conv(x)
        assert watch.first_calls["tf32"]["set_aside"] is True, watch.first_calls
        assert watch.pressured == {}
        # The room went back to the device (the allocator keeps only small blocks).
        assert torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) < 1 << 30
        # Filled again, nothing cached: no room to set aside.
        while torch.cuda.mem_get_info(device)[0] > 256 << 20:
            filler.append(torch.empty(64 << 20, dtype=torch.uint8, device=device))
        with torch.no_grad(), watch.forward("fp32", "choosing the FP32 plans at the first draw"):
            conv(x)
        assert watch.first_calls["fp32"]["no_room"] is True
    finally:
        filler.clear()
        torch.cuda.empty_cache()
