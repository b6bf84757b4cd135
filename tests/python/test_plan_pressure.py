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
