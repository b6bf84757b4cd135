"""The reference role: hosts the problem's `Model`, draws every input family, computes the
golden outputs (TF32 baseline, plain FP32, float64 truth), judges the candidate's outputs
against them with kbv's own comparison, and times the baselines. This process never imports
candidate code, and its golden outputs never leave it (docs/case-path.md).

Cases live in a `CaseStore`: each drawn case keeps its inputs and state in shared blocks (the
candidate's worker opens them) and the outputs it is judged by resident; the store keeps as
many cases as the memory plan's budget allows and draws again (deterministically, from the
session's secret) what it had to let go."""

from __future__ import annotations

import collections
import contextlib
import copy
import json
import math
import os
import random
import secrets
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import (
    devices,
    families,
    float64_convs,
    guards,
    hosting,
    kernel_audit,
    memory,
    numerics,
    params,
    plan_pressure,
    roofline,
    row_chunks,
    scan,
    shared,
    timing,
)
from .loading import WorkerError, construct, import_file, require

MAX_REPLACEMENT_ATTEMPTS = 3
AUDIT_SAMPLE = 1 << 20  # elements of the first case's output kept for the "constant" audit

# The elementwise budget's sensitivity s_i (docs/protocol.md "Correctness"): the RMS over
# SENSITIVITY_RUNS float64 runs of how far each output element moves when every float input
# and parameter element is scaled by (1 + u * r), r a standard normal per element and u the unit
# roundoff of the precision class the protocol's baseline computes in. The ratio of an honest
# error to s_i is t-distributed with this many degrees of freedom, and its tail is what an
# honest kernel flips on: with two runs an emulated TF32 kernel reached 2.7-8.6x its budget on
# wide-range draws, with eight 0.50 at most (protocol version 4; docs/elementwise-budget.md,
# bench/sensitivity_calibration.py). r was a random sign until version 4: where two terms of an
# element dominate, signs cancel them exactly in half the runs, a near-zero s_i a normal r
# does not give.
SENSITIVITY_RUNS = 8
UNIT_ROUNDOFF = {"tf32": 2.0**-11, "fp16": 2.0**-11, "fp32": 2.0**-24}


class _Deferred:
    """A sensitivity not measured yet (docs/protocol.md "Correctness", deferred sensitivity):
    the budget is max(floor, K * s_i), so an output within the floor everywhere passes whatever
    s_i is; s_i is measured only for an output that is not, from a private draw of its case."""

    def __repr__(self) -> str:
        return "DEFERRED"


DEFERRED = _Deferred()


class Case:
    """One drawn case: shared inputs and state, the outputs it is judged by (resident, never
    exported), the checksums of its inputs, and the figures reported for it."""

    def __init__(
        self,
        key: tuple,
        figures: dict[str, Any],
        inputs: shared.Block,
        state,
        judged,
        sensitivity=None,
        sensitivity_seed: int = 0,
        recipe: dict[str, Any] | None = None,
    ):
        self.key = key
        self.figures = figures
        self.inputs = inputs
        self.state: shared.Block | None = state
        self.judged: list[torch.Tensor] = judged
        # Per judged output: the truth's rounding sensitivity (float32), or None (no float64
        # truth, not a floating output, or the protocol judges by a baseline variant).
        # DEFERRED where it is measured only when a candidate needs it (_Deferred).
        self.sensitivity: list = sensitivity or [None] * len(judged)
        self.sensitivity_seed = sensitivity_seed  # the timing set's run draws the same signs
        # How to draw the case again, privately and bit for bit (ReferenceRole._draw_again):
        # the secret and the replacement attempts it took; empty where it cannot be.
        self.recipe: dict[str, Any] = recipe or {}
        self.checksums: dict[Any, int] = {}
        self.state_checksums: dict[str, int] = {}  # of its state block, taken before sharing
        # The draw's forwards left its inputs and state as drawn (an in-place forward, a buffer
        # a forward updates, would not): running the reference on them again gives its outputs.
        self.forwards_pure = False
        self.pins = 0
        self.dirty = False  # a candidate changed its inputs: drawn again before reuse

    @property
    def resident_bytes(self) -> int:
        total = self.inputs.layout["nbytes"] + sum(shared.nbytes(t) for t in self.judged)
        total += _sensitivity_bytes(self.sensitivity, self.judged)
        if self.state is not None and self.state.layout.get("owned", True):
            total += self.state.layout["nbytes"]
        return total

    def close(self) -> None:
        self.inputs.close()
        if self.state is not None and self.state.layout.get("owned", True):
            self.state.close()
        self.judged = []
        self.sensitivity = []


# How much of a meta forward the estimate is worth: KernelBench's dispatch at most 1,793
# operators (0.2 s on a development CPU), but its eight recurrent networks 46,000 to 98,000 (an
# LSTM over 512 steps, 6 to 15 s), and their inputs and state are small enough for the estimate
# from the inputs. Operators, not seconds, so the outcome does not depend on the machine's load
# (a dozen workers start at once on the H200); the seconds only stop a pathological forward.
META_FORWARD_MAX_OPS = 10_000
META_FORWARD_MAX_S = 10.0


class _LiveBytes(TorchDispatchMode):
    """The bytes a forward's operators allocate and keep alive at once, counted as it runs (on
    the meta device, where nothing is allocated): a new storage's size is added when an operator
    returns it, and taken away when the last tensor holding it is freed. Outputs that share a
    storage counted before (views, in-place results, `_unsafe_view`, the pieces of `chunk`) or one
    of `known` (the inputs', the parameters') add nothing. Stops the forward past
    META_FORWARD_MAX_OPS operators or META_FORWARD_MAX_S seconds from its first."""

    def __init__(self, known: set[int]) -> None:
        super().__init__()
        self.known = known
        self.storages: dict[int, list[int]] = {}  # storage -> [bytes, tensors holding it]
        self.live = 0
        self.peak = 0
        self.ops = 0
        self.started: float | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        now = time.monotonic()
        self.started = self.started or now
        if self.ops > META_FORWARD_MAX_OPS:
            raise TimeoutError(f"the meta forward dispatched over {META_FORWARD_MAX_OPS} operators")
        if now - self.started > META_FORWARD_MAX_S:
            raise TimeoutError(f"the meta forward took over {META_FORWARD_MAX_S} s")
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if torch.is_tensor(t):
                self._hold(t)
        return out

    def _hold(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self.known:
            return
        entry = self.storages.get(key)
        if entry is None:
            entry = self.storages[key] = [storage.nbytes(), 0]
            self.live += entry[0]
            self.peak = max(self.peak, self.live)
        entry[1] += 1
        weakref.finalize(t, self._let_go, key)

    def _let_go(self, key: int) -> None:
        entry = self.storages.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                self.live -= entry[0]
                del self.storages[key]


def warm_meta_dispatch_in_background() -> threading.Thread:
    """The first operator a process runs on the meta device imports torch's Python meta kernels
    and, with them, some 900 modules (torch._dynamo, sympy): about 1 s on a quiet machine and a
    median 3.6 s of each problem's load on the H100 with a dozen workers starting (session 25,
    `load_phases_s.meta_forward`), paid in _meta_forward. Done on a thread when a reference
    worker starts, it is paid while the worker waits: by a spare or a session loaded ahead
    before its problem comes (docs/architecture.md). Only imports and shapes: no generator
    moves and nothing is allocated."""

    def warm() -> None:
        x = torch.empty(2, 2, device="meta")
        torch.softmax(torch.nn.functional.linear(x, x) + 1, dim=-1).sum()

    thread = threading.Thread(target=warm, name="kbv-meta-dispatch-warm-up", daemon=True)
    thread.start()
    return thread


class ReferenceRole:
    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.module = None
        self.model: torch.nn.Module | None = None
        self.model64: torch.nn.Module | None = None
        self._model64_kind = "copy"  # or "constructed" (_new_float64_model)
        self._capped = False  # its device allocations are capped (cmd_cap_memory)
        # Which numeric modes of the model chose a library plan under memory pressure: their
        # baselines are not timed (kbv.plan_pressure); whether its FP32 plans were chosen yet.
        self.plans = plan_pressure.Watch(self.device)
        self._fp32_plans_chosen = False
        self._model_on_host = False  # loaded ahead on the host, placed on the device when used
        self.compactions = 0  # times _with_room moved the model out and back (holding says so)
        self._construction: tuple = (None, [])
        self.initial_state: dict[str, torch.Tensor] = {}
        self.initial_block: shared.Block | None = None
        self.keep = "truth"  # what a candidate is judged by: the truth, or a baseline variant
        self.policy = ""  # the protocol's check::Policy as JSON (cmd_load_problem)
        self.checksum_key = secrets.randbits(63)  # a candidate cannot forge what it cannot see
        self.cases: collections.OrderedDict[str, Case] = collections.OrderedDict()
        self.cache_bytes = 0  # cases kept beyond the pinned ones (the memory plan's budget)
        self.blocks: dict[str, shared.Block] = {}  # blocks made for one candidate (released)
        self.expected: dict[str, dict[Any, int]] = {}  # token -> checksums its inputs must have
        self.slot: shared.Block | None = None
        self.timing_sets: list[list] = []
        self.timing_judged: list[list[torch.Tensor]] = []
        self.timing_sensitivity: list[list[torch.Tensor | None]] = []
        self.timing_cases: list[str] = []
        self.roundoff = UNIT_ROUNDOFF["tf32"]  # of the protocol's baseline (TF32 by default)
        self.first_sample: torch.Tensor | None = None
        self._draw_peak_carried = 0  # the device peak of the draw in progress, before the
        self._forward_peak = 0  # TF32 forward's own peak was measured (both per draw)
        self._sensitivity_peak = 0  # a deferred sensitivity's estimated peak (per draw)
        # Whether the evaluation's reservation covers the sensitivity's float64 runs (per
        # request: `sensitivity_room`, false where the harness makes room only when they are
        # needed); a judge that stopped for room, kept for its request sent again.
        self._sensitivity_room = True
        self._pending_judge: dict[str, Any] | None = None
        self._redraws_exact: bool | None = None  # a case drawn again is bit for bit the same
        # The float64 runs a chunk of rows at a time (row_chunks): decided on the first truth
        # run of the session; the number of chunks of the last truth run; why a problem large
        # enough to chunk runs whole (its probe's finding).
        self._row_plan: row_chunks.RowPlan | None = None
        self._row_plan_decided = False
        self._row_plan_note = ""
        self._truth_chunks = 1  # of the last float64 truth run, and why it went whole if so
        self._truth_rows_note = ""
        self._chunked_runs = 0  # which chunk boundary the next run's check looks across
        self._initial_sums: dict[str, int] | None = None  # keyed checksums of the initial state

    # -- the problem --------------------------------------------------------------------------
    def cmd_load_problem(self, request: dict[str, Any]) -> dict[str, Any]:
        laps = hosting.Laps(process_start=hosting.WORKER_READY_S)
        self.device = hosting.device_of(request["device"])
        self.plans = plan_pressure.Watch(self.device)
        self._fp32_plans_chosen = False
        self.keep = request.get("keep", "truth")
        # The protocol's policy (check::Policy JSON): the TF32 baseline is measured against the
        # elementwise budget its candidates get, so the policy can admit the reference's own
        # excess (docs/protocol.md, version 3). Empty: not measured.
        self.policy = json.dumps(request["policy"]) if request.get("policy") else ""
        self.roundoff = UNIT_ROUNDOFF[request.get("precision", "tf32")]
        numerics.set_tf32(True)
        self.module = import_file(request["problem"], "problem")
        laps.lap("import")
        model_cls = require(self.module, "Model", "problem_error", "the problem")
        require(self.module, "get_inputs", "problem_error", "the problem")
        get_init_inputs = require(self.module, "get_init_inputs", "problem_error", "the problem")
        init_inputs = list(get_init_inputs())
        try:
            encoded_init = shared.encode_values(init_inputs)
        except ValueError as error:
            raise WorkerError(
                "problem_error", f"get_init_inputs() must return plain values: {error}"
            ) from error
        hosting.seeded(hosting.CONSTRUCT_SEED)
        # `place: host` (a session kbv run starts ahead of its evaluation): the model and its
        # initial state stay in host memory, where nothing of the device's is taken before the
        # device's memory ledger has a reservation for them (src/eval/reference_work.cpp,
        # permit_ahead). Twice a model's state (2_ShallowWideMLP: 17 GB) used to sit on the
        # device, unaccounted, beside the evaluations in progress. (On the CPU the placement
        # moves nothing; the same exchanges run, so the CPU tests cover them.)
        self._model_on_host = request.get("place") == "host"
        # `device_facts: false` (a load kbv run makes outside the device's gate, beside another
        # evaluation's timing run): nothing here touches the device, not even its context; the
        # facts come in a `device_facts` call under the gate. Session 26's H100 audit: timing
        # runs waited 223 s in all for loads in flight, all else on the device held back meanwhile.
        off_device = request.get("device_facts", True) is False
        model = construct(model_cls, init_inputs, "problem")
        laps.lap("construct")
        self.model = (model if self._model_on_host else model.to(self.device)).eval()
        laps.lap("to_device")
        self._construction = (model_cls, init_inputs)  # for a float64 model built anew
        self.initial_state = {
            k: v.detach().clone().contiguous() for k, v in params.state_tensors(self.model).items()
        }
        laps.lap("initial_state")
        template = self._shape_template(off_device)
        laps.lap("template")
        forward = self._meta_forward(template)
        laps.lap("meta_forward")
        roofline.warm_up_in_background()  # its first use is seconds; the roofline call comes later
        facts = {} if off_device else self.cmd_device_facts({})
        laps.lap("environment")
        return {
            "load_phases_s": laps.seconds,
            "name": Path(request["problem"]).stem,
            "state_spec": params.spec(self.model),
            "inputs": [_as_on(hosting.describe(v), self.device) for v in template],
            "init_inputs": encoded_init,
            "persistent_bytes": memory.state_bytes(self.model),
            "sizes": {
                "input_bytes": sum(shared.nbytes(v) for v in template if torch.is_tensor(v)),
                "state_bytes": sum(shared.nbytes(v) for v in self.initial_state.values()),
                **forward,
            },
            "placed": "host" if self._model_on_host else "device",
            **facts,
        }

    def cmd_device_facts(self, request: dict[str, Any]) -> dict[str, Any]:
        """The device's environment (its name, clocks, software) and its memory now: the part of
        a load that makes the device's context, asked apart after a load with
        `device_facts: false`."""
        if self.module is None:
            raise WorkerError("usage_error", "device_facts before load_problem")
        return {"environment": hosting.environment(self.device), "memory": _memory_now(self.device)}

    def cmd_place_model(self, request: dict[str, Any]) -> dict[str, Any]:
        """The model loaded on the host, and its initial state, onto the device: once the
        device's memory has been reserved for them (a session drawn ahead), or before the first
        command that uses them (before_command)."""
        if self._model_on_host:
            assert self.model is not None
            self.model = self.model.to(self.device)
            self.initial_state = {k: v.to(self.device) for k, v in self.initial_state.items()}
            self._model_on_host = False
        return {"placed": "device", "memory": _memory_now(self.device)}

    # Commands that never touch the model: they leave one loaded on the host where it is.
    _OFF_THE_MODEL = frozenset(
        {
            "load_problem",
            "device_facts",
            "place_model",
            "ping",
            "cap_memory",
            "set_plan",
            "unpin",
            "release",
            "end_candidate",
            "scan",
        }
    )

    def before_command(self, cmd: str | None) -> None:
        """A model still on the host is placed before anything uses it: an evaluation that
        takes over a session loaded ahead places it under its own reservation."""
        if self._model_on_host and cmd not in self._OFF_THE_MODEL:
            self.cmd_place_model({})
        if cmd != "judge":
            # A judge that stopped for room is sent again next or not at all (another
            # candidate's judge of the same case must never meet its answer).
            self._pending_judge = None

    def _shape_template(self, off_device: bool = False) -> list:
        """The problem's inputs described without drawing them: on the meta device, where
        factory calls allocate nothing (a real draw where a problem's generator needs values:
        on the host for a load kept off the device)."""
        assert self.module is not None
        try:
            return families.native_inputs(
                self.module.get_inputs, families.PUBLIC_SEED, torch.device("meta")
            )
        except Exception:  # noqa: BLE001 - a generator that needs real values
            device = torch.device("cpu") if off_device else self.device
            return families.native_inputs(self.module.get_inputs, families.PUBLIC_SEED, device)

    def _meta_forward(self, template: list) -> dict[str, Any]:
        """The float32 forward's outputs and live peak (its intermediates and outputs), from a
        run on the meta device: shapes only, nothing allocated, a model built anew there. What
        the memory ledger reserves before the first draw follows from them
        (src/eval/memory_plan.hpp, working_bytes_before_drawing): the inputs alone said 0.1 GB
        for a matmul of small K whose 4.3 GB product needed 64 GB in session 13. A forward the
        meta device cannot run (data-dependent Python, `.item()`, a custom op) or that
        dispatches more than META_FORWARD_MAX_OPS operators leaves `forward_estimate` saying
        why, and the estimate from the inputs stands."""
        if not all(x.device.type == "meta" for x in template if torch.is_tensor(x)):
            return {"forward_estimate": "unavailable: the inputs need real values to be drawn"}
        model_cls, init_inputs = self._construction
        # The generators as they were after it (torch's, Python's, numpy's): the problem's
        # construction and forwards draw from them, and a draw here would move every later one.
        numpy_random = getattr(sys.modules.get("numpy"), "random", None)
        states = (random.getstate(), numpy_random.get_state() if numpy_random else None)
        try:
            with _torch_generators_kept(self.device), torch.device("meta"):
                model = construct(model_cls, copy.deepcopy(init_inputs), "problem").eval()
                held = [*template, *model.parameters(), *model.buffers()]
                known = {t.untyped_storage()._cdata for t in held if torch.is_tensor(t)}
                counter = _LiveBytes(known)
                with torch.no_grad(), counter:
                    outputs, _ = hosting.as_outputs(model(*template))
                output_bytes = sum(shared.nbytes(o) for o in outputs if torch.is_tensor(o))
        except Exception as error:  # noqa: BLE001 - an estimate; the inputs' rule stands
            return {"forward_estimate": f"unavailable: {type(error).__name__}: {str(error)[:160]}"}
        finally:
            random.setstate(states[0])
            if numpy_random is not None:
                numpy_random.set_state(states[1])
            # A problem that names a device of its own (`device="cuda"`) allocated there.
            _release_cached(self.device)
        return {
            "forward_estimate": "meta",
            "output_bytes": output_bytes,
            "forward_peak_bytes": max(counter.peak, output_bytes),
        }

    def cmd_set_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        """The memory plan's budget for cases kept beyond those in use. `let_go`: every case not
        in use goes now (an evaluation that gives its device memory back to wait for more);
        they are drawn again, the same draws, when next prepared."""
        self.cache_bytes = int(request["cache_bytes"])
        self._evict(0, everything=bool(request.get("let_go", False)))
        return {"resident_bytes": self._resident_bytes()}

    # -- cases --------------------------------------------------------------------------------
    def cmd_prepare_case(self, request: dict[str, Any]) -> dict[str, Any]:
        """Makes case `id` resident (drawn now, or kept from before and checked unchanged) and
        answers its figures. `pin` keeps it resident until `unpin` or `end_candidate`.
        A draw whose sensitivity must be measured at once (its baseline over the floor, or a
        draw that cannot be repeated) fails `sensitivity_room` where there is no room for it:
        nothing is kept, and the harness sends the request again once it has made room."""
        self._sensitivity_room = bool(request.get("sensitivity_room", True))
        case_id = request["id"]
        key = (
            request["family"],
            request["draw"],
            tuple(sorted(request["redraw"])),
            bool(request.get("perturb", False)),
        )
        started = time.monotonic()
        case = self.cases.get(case_id)
        if case is not None and (case.key != key or case.dirty or not self._unchanged(case)):
            self._drop(case_id)
            case = None
        cached = case is not None
        if case is None:
            case = self._with_room(lambda: self._draw_case(case_id, key, request["secret"]))
            self.cases[case_id] = case
        self.cases.move_to_end(case_id)
        if request.get("pin"):
            case.pins += 1
        self._evict(0)
        figures = dict(case.figures)
        figures["cached"] = cached
        figures["seconds"] = time.monotonic() - started
        figures["store"] = {"cases": len(self.cases), "resident_bytes": self._resident_bytes()}
        return figures

    def cmd_unpin(self, request: dict[str, Any]) -> dict[str, Any]:
        for case_id in request["ids"]:
            if case_id in self.cases:
                self.cases[case_id].pins = max(0, self.cases[case_id].pins - 1)
        self._evict(0)
        return {}

    def cmd_share_case(self, request: dict[str, Any]) -> dict[str, Any]:
        """Case `id`'s inputs and state for the candidate: its own blocks, or with `fresh` a
        new copy of its input values (new addresses, same values)."""
        case = self._resident(request["id"])
        # What is held as the request comes (before a fresh copy): the call trace's account of
        # what the re-checks keep resident beside each copy they make (docs/case-path.md).
        store = {
            "case": request["id"],
            "fresh": bool(request.get("fresh")),
            "pinned": [i for i, c in self.cases.items() if c.pins > 0],
            "resident_bytes": self._resident_bytes(),
            "blocks": len(self.blocks),
        }
        answer: dict[str, Any] = {"inputs": None, "state": None, "store": store}
        fds = []
        if request.get("inputs", True):  # not when the candidate reuses blocks it kept
            inputs = case.inputs
            if request.get("fresh"):
                inputs = self._with_room(
                    lambda: shared.allocate(case.inputs.as_list(), self.device)
                )
                self.blocks[inputs.token] = inputs
            self.expected[inputs.token] = dict(case.checksums)
            answer["inputs"] = inputs.layout
            fds.append(inputs.export_fd())
        if case.state is not None:
            answer["state"] = case.state.layout
            fds.append(case.state.export_fd())
        answer["_fds"] = [fd for fd in fds if fd is not None]
        return answer

    def cmd_write_into(self, request: dict[str, Any]) -> dict[str, Any]:
        """Writes case `id`'s input values into the block `token` shared before (same
        addresses, new values: the caching re-check)."""
        case = self._resident(request["id"])
        block = self._block(request["token"])
        for target, value in zip(block.as_list(), case.inputs.as_list(), strict=True):
            if torch.is_tensor(target):
                target.copy_(value)
        devices.synchronize(self.device)
        self.expected[block.token] = dict(case.checksums)
        return {}

    def cmd_share_slot(self, request: dict[str, Any]) -> dict[str, Any]:
        """The block the candidate copies its outputs into: one per candidate, shaped like the
        reference's outputs."""
        if self.slot is not None:
            self.slot.close()
        like = [
            torch.empty(o["shape"], dtype=shared.dtype_of(o["dtype"]), device="meta")
            for o in request["outputs"]
        ]
        self.slot = shared.allocate(like, self.device, copy=False)
        fd = self.slot.export_fd()
        return {"slot": self.slot.layout, "_fds": [fd] if fd is not None else []}

    def cmd_judge(self, request: dict[str, Any]) -> dict[str, Any]:
        """Measures the slot's outputs against case `id`'s (or timing set `timing`'s) judged
        outputs, one pass per entry of `passes` ({index, spec}), and checks that the inputs the
        candidate ran on (`token`, default the case's own block) are unchanged.

        A pass over the floor whose sensitivity is deferred needs the sensitivity's float64 runs,
        which the evaluation's reservation need not cover (the memory plan leaves them out:
        most candidates never need them). Without room for them (`sensitivity_room: false`) the
        judge keeps what it measured and fails `sensitivity_room`; the harness makes room and
        sends the same request again. If the slot changed in between (a thread the candidate
        left running), the answer is the one measured first, over the floor, as it is for an
        output that changes while it is copied."""
        self._sensitivity_room = bool(request.get("sensitivity_room", True))
        pending, self._pending_judge = self._pending_judge, None
        if self.slot is None:
            raise WorkerError("internal_error", "judge before share_slot")
        timing = int(request["timing"]) if "timing" in request else None
        if timing is not None:
            judged = self.timing_judged[timing]
            sensitivity = self.timing_sensitivity[timing]
            case = self._resident(self.timing_cases[timing])
        else:
            case = self._resident(request["id"])
            judged, sensitivity = case.judged, case.sensitivity
        outputs = self.slot.as_list()
        passes = request.get("passes", [])
        figures: list[dict[str, Any]] = []
        sums: list[int] = []  # what was judged, keyed, read right after it was measured
        over_floor: list[int] = []  # passes over the floor whose sensitivity is deferred
        for n, p in enumerate(passes):
            index = int(p["index"])
            # Only a pass whose spec opens budgets by sensitivity reads it (allclose does not).
            sens = sensitivity[index] if _spec_sens(p["spec"]) > 0 else None
            if sens is DEFERRED:
                # Within the floor everywhere, the output is within max(floor, K * s_i)
                # whatever s_i is: the floor's figures stand (its margin is an upper bound).
                measured = _measure(outputs[index], judged[index], p["spec"], None)
                figures.append({"index": index, "budget": "floor", "measurement": measured})
                sums.append(self._checksum(outputs[index]))
                if _over_floor(measured, p):
                    over_floor.append(n)
                continue
            measured = _measure(outputs[index], judged[index], p["spec"], sens)
            figures.append({"index": index, "measurement": measured})
            # The determinism re-check compares two runs' outputs bitwise by these.
            sums.append(self._checksum(outputs[index]))
        # The inputs and what was judged are read now, as the outputs were, before any deferred
        # sensitivity's seconds of float64 runs (a thread the candidate left running could
        # otherwise put its inputs back, or its outputs right, meanwhile).
        token = request.get("token", case.inputs.token)
        block = case.inputs if token == case.inputs.token else self._block(token)
        mutated = self._changed_inputs(block, self.expected.get(token, case.checksums))
        if mutated and block is case.inputs:
            case.dirty = True  # drawn again before anyone else uses it
        answer = {"outputs": figures, "inputs_mutated": mutated, "slot_checksums": sums}
        asked = _judge_key(request)
        if pending is not None and pending["request"] == asked:
            # The request again, once room was made: a mutation seen the first time stands.
            answer["inputs_mutated"] = _union(pending["answer"]["inputs_mutated"], mutated)
            if pending["answer"]["slot_checksums"] != sums:
                first = pending["answer"]
                for f, judge_pass in zip(first["outputs"], passes, strict=True):
                    if f.get("budget") == "floor" and _over_floor(f["measurement"], judge_pass):
                        f["budget"] = _CHANGED_WHILE_JUDGED
                return first | {"inputs_mutated": answer["inputs_mutated"]}
        if over_floor and not self._sensitivity_room:
            self._pending_judge = {"request": asked, "answer": answer}
            self._require_room()
        if over_floor:
            self._judge_with_sensitivity(
                case, judged, sensitivity, timing, outputs, passes, over_floor, figures, sums
            )
        return answer

    def _judge_with_sensitivity(
        self, case, judged, sensitivity, timing, outputs, passes, over_floor, figures, sums
    ) -> None:
        """The passes over the floor whose sensitivity was deferred, judged by their full budget:
        each output is copied into this process first and the copy checked against the
        checksum taken with the floor's measurement, so the bytes judged are the bytes measured
        and checksummed, whatever the candidate's threads write into its slot meanwhile. An
        output that changed in between is left with the floor's figures (over it: it fails)."""
        copies: dict[int, torch.Tensor] = {}
        for n in over_floor:
            index = int(passes[n]["index"])
            copy_ = self._with_room(lambda index=index: outputs[index].clone())
            if self._checksum(copy_) != sums[n]:
                figures[n]["budget"] = _CHANGED_WHILE_JUDGED
                continue
            copies[n] = copy_
        del copy_
        if copies:
            sensitivity[:] = self._measure_deferred(case, judged, timing is not None)
            if timing is None:
                case.figures["sensitivity"] = "measured for a candidate over the floor"
        for n in list(copies):
            index = int(passes[n]["index"])
            measured = _measure(copies.pop(n), judged[index], passes[n]["spec"], sensitivity[index])
            figures[n] = {
                "index": index,
                "budget": "sensitivity measured for this output",
                "measurement": measured,
            }
        _release_cached(self.device)

    def cmd_release(self, request: dict[str, Any]) -> dict[str, Any]:
        for token in request["tokens"]:
            block = self.blocks.pop(token, None)
            self.expected.pop(token, None)
            if block is not None:
                block.close()
        return {}

    def cmd_end_candidate(self, request: dict[str, Any]) -> dict[str, Any]:
        """Everything made for one candidate goes: copies, the slot, timing sets and pins. The
        cases stay (within the budget) for the next candidate of this problem."""
        for block in self.blocks.values():
            block.close()
        self.blocks.clear()
        self.expected.clear()
        if self.slot is not None:
            self.slot.close()
            self.slot = None
        self.timing_sets, self.timing_judged, self.timing_cases = [], [], []
        self.timing_sensitivity = []
        for case in self.cases.values():
            case.pins = 0
        self._evict(0)
        _release_cached(self.device)
        return {"resident_bytes": self._resident_bytes()}

    def cmd_prepare_timing_sets(self, request: dict[str, Any]) -> dict[str, Any]:
        """The timing inputs are the inputs of cases `ids` (pinned meanwhile), run under the
        initial state both sides are timed with; their outputs under that state are computed
        and kept, so the outputs of timed calls can be judged too (T5, T6). A case drawn under
        the initial state already has them (_timing_outputs). Failing `sensitivity_room` (see
        cmd_prepare_case), it lets go of what it pinned: the request comes again."""
        assert self.model is not None
        self._sensitivity_room = bool(request.get("sensitivity_room", True))
        pinned: list[Case] = []
        try:
            return self._prepare_timing_sets(request, pinned)
        except WorkerError as error:
            if error.kind == "sensitivity_room":
                for case in pinned:
                    case.pins = max(0, case.pins - 1)
            raise
        finally:
            # A set computed here (a case under redrawn parameters) ran the float64 forward:
            # its intermediates go back to the device before the candidate is timed beside this
            # worker. (On session 21's H100 an attention problem's reference copy ran out of
            # memory in timing, alone on the card, with 57 GB held by other processes: this
            # worker's cached float64 scores, tens of GB, fit that figure.)
            _release_cached(self.device)

    def _prepare_timing_sets(self, request: dict[str, Any], pinned: list) -> dict[str, Any]:
        self.timing_sets, self.timing_judged, self.timing_cases = [], [], []
        self.timing_sensitivity = []
        params.load_into(self.model, self.initial_state, {k: k for k in self.initial_state})
        answer_sets, golden, fds = [], [], []
        for i, case_id in enumerate(request["ids"]):
            case = self._resident(case_id)
            case.pins += 1
            pinned.append(case)
            inputs = case.inputs.as_list()
            outputs = self._timing_outputs(case, inputs)
            self.timing_sets.append(inputs)
            self.timing_judged.append(outputs["judged"])
            self.timing_sensitivity.append(outputs["sensitivity"])
            self.timing_cases.append(case_id)
            self.expected[case.inputs.token] = dict(case.checksums)
            golden.append(
                {
                    "id": f"timing-{i}",
                    "case": case_id,
                    "outputs": len(outputs["judged"]),
                    "structure": outputs["structure"],
                    "truth": outputs["truth_kind"],
                    "baselines": outputs["baselines"],
                    "from_case": bool(outputs.get("reused")),
                }
            )
            answer_sets.append({"case": case_id, "inputs": case.inputs.layout})
            fds.append(case.inputs.export_fd())
        state = self._initial_block()
        if state is not None:
            fds.append(state.export_fd())
        return {
            "sets": answer_sets,
            "golden": golden,
            "state": state.layout if state is not None else None,
            "_fds": [fd for fd in fds if fd is not None],
        }

    def _timing_outputs(self, case: Case, inputs: list) -> dict[str, Any]:
        """What a timing set of `case` is judged by: its outputs under the initial state. Where
        the case was drawn under that very state (a native case, a problem without parameters
        to redraw) and its forwards left inputs and state as drawn, they are the case's own,
        computed before any candidate saw it; running the TF32 and float64 forwards again
        would give them once more (on KernelBench's level 1 a timing set was one float64
        forward in fourteen). Its sensitivity list is the case's: measured for one, it is
        measured for both. Else they are computed now."""
        if case.forwards_pure and case.state_checksums == self._initial_checksums():
            return {
                "judged": case.judged,
                "sensitivity": case.sensitivity,
                "baselines": case.figures["baselines"],
                "truth_kind": case.figures["truth"],
                "structure": case.figures["structure"],
                "reused": True,
            }
        return self._run_variants(
            inputs,
            sensitivity_seed=case.sensitivity_seed,
            deferrable=bool(case.recipe) and self._redraws_exact is True,
        )

    def cmd_check_timing_inputs(self, request: dict[str, Any]) -> dict[str, Any]:
        """Which timing sets' inputs changed since they were drawn (a candidate writing into
        inputs the baseline is timed on)."""
        changed = []
        for i, case_id in enumerate(self.timing_cases):
            case = self._resident(case_id)
            if self._changed_inputs(case.inputs, case.checksums):
                case.dirty = True
                changed.append(i)
        return {"changed": changed}

    # -- the baselines' measurements ----------------------------------------------------------
    def cmd_time(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        params.load_into(self.model, self.initial_state, {k: k for k in self.initial_state})
        variant = request["variant"]
        self.plans.refuse((variant,))
        numerics.set_tf32(variant == "tf32")
        try:
            sets = self.timing_sets
            # One window around the loop (a window a call would cost each timed call host time);
            # the timing catches nothing, so an out-of-memory it raised is the only one raised.
            with self.plans.forward(variant, "timing the baseline"):
                timed = timing.time_calls(
                    lambda i: self.model(*sets[i % len(sets)]),
                    self.device,
                    request["calls"],
                    request["warmup"],
                    steady=request.get("steady_warmup", False),
                )
        finally:
            numerics.set_tf32(True)
        self.plans.refuse((variant,))  # a plan chosen, or replaced, in this very timing
        return timed

    def cmd_time_secondary(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._as_variant(request, timing.secondary_times)

    def cmd_kernel_audit(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._as_variant(request, kernel_audit.kernel_audit, per_call=True)

    def _as_variant(self, request: dict[str, Any], what, per_call: bool = False) -> dict:
        """The secondary figures and the kernel audit of a baseline, after its timing: a plan
        chosen under pressure before them is refused; one chosen in them is marked (the kept
        session is then not reused, nor timed again) without undoing figures already taken.
        The kernel audit catches its calls' failures itself: watched call by call there."""
        assert self.model is not None
        params.load_into(self.model, self.initial_state, {k: k for k in self.initial_state})
        variant = request["variant"]
        self.plans.refuse((variant,))
        numerics.set_tf32(variant == "tf32")
        try:
            sets, model = self.timing_sets, self.model

            def call(i):
                return model(*sets[i % len(sets)])

            where = f"the baseline's {request.get('cmd', 'figures')}"
            if per_call:
                return what(self.plans.call(variant, where, call), self.device, request["calls"])
            with self.plans.forward(variant, where):
                return what(call, self.device, request["calls"])
        finally:
            numerics.set_tf32(True)

    def cmd_memory(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        numerics.set_tf32(True)
        params.load_into(self.model, self.initial_state, {k: k for k in self.initial_state})
        inputs = self.timing_sets[0]
        # Watched: a cached plan whose workspace cannot be had now is replaced for good.
        with self.plans.forward("tf32", "the baseline's memory pass"):
            hosting.forward(self.model, inputs, self.device)  # steady state: no first-call costs
            result = memory.peak_memory(lambda: self.model(*inputs), self.device)
        result["persistent_bytes"] = memory.state_bytes(self.model)
        return result

    def cmd_cap_memory(self, request: dict[str, Any]) -> dict[str, Any]:
        """Caps what torch's allocator may hold in this process on the device at `bytes` (0:
        lifts the cap): a session drawn ahead of its evaluation stays within what it reserved
        of the device's ahead share, whatever its forward's intermediates turn out to need (an
        attention problem's scores are far above its inputs); over it, its draw runs out of
        memory in this process, not in another evaluation's. Nothing to cap on the host."""
        if self.device.type != "cuda":
            return {"capped": False}
        total = torch.cuda.get_device_properties(self.device).total_memory
        wanted = int(request.get("bytes", 0))
        fraction = min(1.0, wanted / total) if wanted > 0 else 1.0
        torch.cuda.set_per_process_memory_fraction(fraction, self.device)
        self._capped = fraction < 1.0
        return {"capped": self._capped, "fraction": fraction}

    def cmd_ping(self, request: dict[str, Any]) -> dict[str, Any]:
        """Alive and serving: a kept reference is checked before another candidate reuses it."""
        return {
            "resident_bytes": self._resident_bytes(),
            "cases": len(self.cases),
            "plans_under_pressure": self.plans.to_json(),
        }

    def cmd_roofline(self, request: dict[str, Any]) -> dict[str, Any]:
        """FLOPs and compulsory bytes of one reference forward on the first timing set, and,
        when asked, measured device peaks (for the roofline floor)."""
        assert self.model is not None
        params.load_into(self.model, self.initial_state, {k: k for k in self.initial_state})
        numerics.set_tf32(True)
        with self.plans.forward("tf32", "the reference's cost"):
            cost = roofline.reference_cost(self.model, self.timing_sets[0], self.device)
        if request.get("measure_peaks"):
            cost["measured_peaks"] = roofline.measure_peaks(self.device)
        return cost

    def cmd_scan(self, request: dict[str, Any]) -> dict[str, Any]:
        """Static scan of the candidate file (parsed, never executed; this process is trusted)."""
        return scan.scan_file(request["candidate"])

    def cmd_trace(self, request: dict[str, Any]) -> dict[str, Any]:
        """The operators the reference's own forward dispatches on case `id`."""
        assert self.model is not None
        case = self._resident(request["id"])
        inputs = [v.clone() if torch.is_tensor(v) else v for v in case.inputs.as_list()]
        numerics.set_tf32(True)
        # Call by call: the tracer may catch a call's failure itself.
        watched = self.plans.call("tf32", "the reference's operator trace", self.model)
        return guards.trace_forward(lambda: watched(*inputs), None)

    # -- drawing one case ---------------------------------------------------------------------
    def _draw_case(self, case_id: str, key: tuple, secret: str) -> Case:
        assert self.model is not None and self.module is not None
        family, draw, redraw_names, perturb = key[0], key[1], set(key[2]), key[3]
        started = time.monotonic()
        _reset_peak(self.device)
        self._draw_peak_carried = 0
        self._forward_peak = 0
        self._sensitivity_peak = 0
        note = None
        gen, state = self._drawn_state(family, draw, redraw_names, secret)
        if state is self.initial_state:
            state_block = self._initial_block()
        else:
            state_block = shared.allocate(state, self.device) if state else None
            if state_block is not None:
                state = state_block.as_dict()
        params.load_into(self.model, state, {k: k for k in state})
        # Before any candidate sees the block: what a private draw of this state must equal.
        state_checksums = self._state_checksums(state)

        attempt = 0
        phases: dict[str, float] = {"state": time.monotonic() - started}
        perturbed = None
        # The sensitivity's perturbation signs follow the secret seed: a draw is reproducible.
        sensitivity_seed = families.derive_seed(secret, "sensitivity", family, draw)
        while True:
            mark = time.monotonic()
            block = self._draw_inputs(family, draw, secret, gen, attempt)
            if perturb:
                perturbed = _perturb_one_element(block.as_list(), secret, family, draw)
            phases["inputs"] = phases.get("inputs", 0.0) + time.monotonic() - mark
            drawn = self._checksums(block)  # before the reference's forwards (see _defer_or_not)
            outputs = self._run_variants(block.as_list(), phases, sensitivity_seed, deferrable=True)
            if perturb:
                # The same draw as the plain case, one element changed: never replaced by
                # another draw (a reference that is not finite on it only skips the re-check).
                if perturbed is not None and not outputs["tf32_finite"]:
                    perturbed = {"skipped": "the reference output is not finite on it"}
                break
            if family in ("native", "h1_native") or family.startswith("paper_"):
                break
            if outputs["tf32_finite"]:
                if attempt:
                    note = {
                        "case": case_id,
                        "detail": f"{family} draw {draw}: the reference was non-finite; "
                        f"replaced by a milder draw (attempt {attempt})",
                    }
                break
            block.close()
            attempt += 1
            if attempt > MAX_REPLACEMENT_ATTEMPTS:
                # Reported and replaced, never skipped: a native draw under a secret seed.
                block = self._draw_inputs("h1_native", 1000 + draw, secret, gen, 0)
                drawn = self._checksums(block)
                outputs = self._run_variants(
                    block.as_list(), phases, sensitivity_seed, deferrable=True
                )
                note = {
                    "case": case_id,
                    "detail": f"{family} draw {draw}: the reference output is non-finite for "
                    "every law tried; replaced by a hidden native draw",
                }
                break

        inputs = block.as_list()
        mark = time.monotonic()
        figures = {
            "id": case_id,
            "family": family,
            "draw": draw,
            "outputs": len(outputs["judged"]),
            "structure": outputs["structure"],
            "truth": outputs["truth_kind"],
            "truth_note": outputs.get("truth_note"),
            "truth_chunks": outputs["truth_chunks"],
            # The chunks' rows, or why a float64 working set large enough to go in chunks went
            # whole (python/kbv/row_chunks.py).
            "truth_rows": (
                self._row_plan.to_json()
                if outputs["truth_chunks"] > 1 and self._row_plan is not None
                else None
            ),
            "truth_rows_note": outputs["truth_rows_note"] or None,
            "baselines": outputs["baselines"],
            "input_rms": max(
                (families.rms(x) for x in inputs if families.is_float(x)), default=0.0
            ),
            "reference_aliases_input": outputs["aliases"],
            "audit": self._audit_figures(outputs["first_output"]) if not perturb else {},
            "note": note,
        }
        if perturb:
            figures["perturbed"] = perturbed or {"skipped": "no floating-point input to change"}
        phases["figures"] = time.monotonic() - mark
        mark = time.monotonic()
        case = Case(
            key,
            figures,
            block,
            state_block,
            outputs["judged"],
            outputs["sensitivity"],
            sensitivity_seed,
            {"secret": secret, "attempts": attempt},
        )
        case.checksums = self._checksums(block)
        case.state_checksums = state_checksums
        case.forwards_pure = drawn == case.checksums and (
            self._state_checksums(params.state_tensors(self.model)) == state_checksums
        )
        phases["checksums"] = time.monotonic() - mark
        if case.forwards_pure and not self._fp32_plans_chosen:
            self._choose_fp32_plans(block.as_list())
        self._defer_or_not(case, phases)
        _release_cached(self.device)
        figures["bytes"] = {
            "inputs": block.layout["nbytes"],
            "state": state_block.layout["nbytes"] if state_block is not None else 0,
            "judged": sum(shared.nbytes(t) for t in case.judged),
            "sensitivity": _sensitivity_bytes(case.sensitivity, case.judged),
            "draw_peak": max(_peak(self.device), self._draw_peak_carried),
            # A deferred sensitivity's runs were not part of this draw: their estimated peak
            # (_run_variants), which an evaluation reserves only once a judge or a later draw
            # needs them (`sensitivity_room`); 0 where nothing was deferred.
            "sensitivity_peak": self._sensitivity_peak,
            "forward_peak": self._forward_peak,
        }
        figures["sensitivity"] = _sensitivity_state(case.sensitivity)
        figures["draw_seconds"] = time.monotonic() - started
        # Where the draw's time went (each phase ends in a host read of a device figure, so
        # these are device times too): the first thing to read when a large problem is slow.
        figures["draw_phases_s"] = {k: round(v, 4) for k, v in phases.items()}
        if self.plans.pressured:
            # Refused at the draw, before any candidate runs on it: the session is let go and
            # the evaluation tried again alone (a draw ahead: drawn again by its evaluation).
            case.close()
            self.plans.refuse()
        return case

    def _choose_fp32_plans(self, inputs: list) -> None:
        """Under `verified` no draw runs the model in FP32, so its first FP32 call, where its
        library plans are chosen, would come in the timing, beside the candidate's memory: one
        FP32 forward beside the session's first TF32 one chooses them in the same room, watched
        the same way. Only after a forward that left inputs and state as drawn (an extra call
        of one that does not would change what the case's figures describe); elsewhere the
        timing's first call chooses them, watched too."""
        self._fp32_plans_chosen = True
        if self.device.type != "cuda" or self.keep == "fp32":
            return  # no TF32 on the host; the `standard` protocol's draws run FP32 already
        assert self.model is not None
        numerics.set_tf32(False)
        try:
            with self.plans.forward("fp32", "choosing the FP32 plans at the first draw"):
                hosting.forward(self.model, inputs, self.device)
        finally:
            numerics.set_tf32(True)

    def _defer_or_not(self, case: Case, phases: dict[str, float]) -> None:
        """A deferred sensitivity is measured later from a private draw of the case, so the
        draw must be repeatable: the reference's forwards left its inputs and state as drawn
        (an in-place forward, a buffer a forward updates, would not), and the problem's own
        generator follows torch's seeds (checked once per session, on its first deferred case,
        by drawing it again). Where either fails, the sensitivity is measured now, as it would
        have been without deferral; the case then records no recipe, and its timing set (the
        same inputs under the initial state, deferred on its own terms) is not deferred either.
        So this runs for every case whose protocol may defer, deferred or not."""
        if not (self.keep == "truth" and self.policy):
            return  # nothing is deferred under this protocol
        repeatable = case.forwards_pure
        if repeatable and self._redraws_exact is None:
            mark = time.monotonic()
            try:
                block, _ = self._draw_again(case)
                block.close()
                self._redraws_exact = True
            except WorkerError:
                self._redraws_exact = False
            phases["redraw_check"] = time.monotonic() - mark
        if repeatable and self._redraws_exact:
            return
        case.recipe = {}
        if not any(s is DEFERRED for s in case.sensitivity):
            return
        mark = time.monotonic()
        case.sensitivity = self._sensitivity_now(
            case.inputs.as_list(), case.judged, case.sensitivity_seed
        )
        self._sensitivity_peak = 0  # measured: in the draw's own peak, nothing deferred
        phases["sensitivity"] = phases.get("sensitivity", 0.0) + time.monotonic() - mark

    def _drawn_state(self, family: str, draw: int, redraw_names: set, secret: str):
        """The generator a case's draws share and the state it runs under: the initial state for
        the native and paper families, else the named tensors redrawn from the construction's
        moments (the inputs are drawn from the same generator next)."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(families.derive_seed(secret, "state", family, draw))
        if family in ("native",) or family.startswith("paper_"):
            return gen, self.initial_state
        return gen, params.redrawn_state(self.initial_state, redraw_names, gen)

    def _draw_again(self, case: Case) -> tuple[shared.Block, dict[str, torch.Tensor]]:
        """Case `case`'s inputs and state drawn again in this process only, as _draw_case drew
        them (the same seeds, the same replacement attempts, the same perturbed element) and
        checked against the checksums taken before any candidate saw the originals. A deferred
        sensitivity is measured from these: the case's own blocks are mapped writable in the
        candidate's process, where a thread it left running could change them meanwhile."""
        family, draw, redraw_names, perturb = case.key
        redraw_names = set(redraw_names)
        secret, attempts = case.recipe["secret"], case.recipe["attempts"]
        gen, state = self._drawn_state(family, draw, redraw_names, secret)
        block = None
        try:
            for attempt in range(min(attempts, MAX_REPLACEMENT_ATTEMPTS) + 1):
                if block is not None:
                    block.close()
                    block = None
                block = self._draw_inputs(family, draw, secret, gen, attempt)
            if attempts > MAX_REPLACEMENT_ATTEMPTS:
                block.close()
                block = None
                block = self._draw_inputs("h1_native", 1000 + draw, secret, gen, 0)
            if perturb:
                _perturb_one_element(block.as_list(), secret, family, draw)
            same_state = self._state_checksums(state)
            same = self._checksums(block) == case.checksums
        except BaseException:
            if block is not None:
                block.close()
            raise
        if not same or same_state != case.state_checksums:
            block.close()
            raise WorkerError(
                "internal_error",
                f"case {case.figures.get('id')} drawn again is not bit for bit the case (the "
                "problem's get_inputs or its construction does not follow torch's seeds); its "
                "rounding sensitivity is measured from such a private draw",
            )
        return block, state

    def _measure_deferred(self, case: Case, truth: list, initial_state: bool) -> list:
        """The sensitivity of `truth` (a case's judged outputs, or a timing set's under the
        initial state), measured now from private draws of the case: one per perturbed run,
        each let go before its forward (its float64 copy is all the run needs), so the peak is
        the draw's own."""
        self._require_room()

        def inputs_of_run():
            block, state = self._draw_again(case)
            # Integer inputs are passed through unperturbed: kept apart, the block goes.
            values = [
                v.clone() if torch.is_tensor(v) and not families.is_float(v) else v
                for v in block.as_list()
            ]
            return values, (self.initial_state if initial_state else state), block.close

        case.pins += 1  # not let go by _with_room while its truth is read
        try:
            return self._with_room(
                lambda: self._sensitivity(inputs_of_run, truth, case.sensitivity_seed)
            )
        finally:
            case.pins -= 1
            # The runs' float64 copies and intermediates go back to the device: the candidate's
            # next forward and the next case's arenas need them.
            _release_cached(self.device)

    def _draw_inputs(self, family, draw, secret, gen, attempt) -> shared.Block:
        """The case's inputs, drawn on the device into a new shared block."""
        get_inputs = self.module.get_inputs
        if family == "native":
            values = families.native_inputs(get_inputs, families.PUBLIC_SEED + draw, self.device)
            return self._into_block(values)
        if family.startswith("paper_"):
            template = families.native_inputs(get_inputs, families.PUBLIC_SEED, self.device)
            return self._into_block(families.paper_inputs(family, template))
        seed = families.derive_seed(secret, "inputs", family, draw)
        template = families.native_inputs(get_inputs, seed, self.device)
        if family == "h1_native":
            return self._into_block(template)
        # attempt 0: both signs everywhere; 1: natively non-negative tensors keep their support
        # (the op has a domain); 2-3: that, with a narrower law.
        nonnegative = families.nonnegative_indices(template) if attempt >= 1 else set()
        mildness = max(0, attempt - 1)
        block = shared.allocate(template, self.device, copy=False)
        targets = block.as_list()
        for target, value in zip(targets, template, strict=True):
            if torch.is_tensor(value) and not families.is_float(value):
                target.copy_(value)  # integer tensors keep their native values
        families.hidden_inputs(family, draw, template, gen, nonnegative, mildness, into=targets)
        return block

    def _into_block(self, values: list) -> shared.Block:
        block = shared.allocate(values, self.device)
        values.clear()  # the drawn tensors go now: the block holds the values
        return block

    def _run_variants(
        self,
        inputs: list,
        phases: dict[str, float] | None = None,
        sensitivity_seed: int = 0,
        deferrable: bool = False,
    ) -> dict[str, Any]:
        """The float64 truth (with its per-element sensitivity when the protocol judges by
        it), the TF32 baseline and plain FP32 for one input set: each baseline is measured
        against the truth at once (the figures the policy needs) and freed unless the protocol
        judges by it. Only the judged outputs and the sensitivity stay resident.

        `deferrable` (a case's draw, whose recipe can draw it again): where the TF32 baseline
        is within the floor of its budget everywhere, the sensitivity is left DEFERRED, measured
        only for a candidate that is not (cmd_judge); its two float64 runs were most of a
        draw's time. Where the baseline is over the floor the reference's own excess must be
        exact (version 3), so it is measured now."""
        assert self.model is not None
        phases = {} if phases is None else phases

        def lap(name: str, since: float) -> float:
            now = time.monotonic()
            phases[name] = phases.get(name, 0.0) + now - since
            return now

        mark = time.monotonic()
        numerics.set_tf32(True)
        # (With a deferrable draw the TF32 outputs are measured first against the floor, as
        # below; the truth comes first either way.)
        # The TF32 forward's own peak (its intermediates and outputs): a candidate's process
        # needs about that much beside the cases, and keeps it cached after its call (the memory
        # plan's working bytes). The draw's peak so far is carried over the counter's reset.
        self._draw_peak_carried = max(self._draw_peak_carried, _peak(self.device))
        allocated_before = _allocated(self.device)
        _reset_peak(self.device)
        with self.plans.forward("tf32", "drawing a case"):
            tf32, structure = hosting.as_outputs(hosting.forward(self.model, inputs, self.device))
        self._forward_peak = max(self._forward_peak, _peak(self.device) - allocated_before)
        _require_tensors(tf32)
        aliases = any(
            hosting.shares_storage(o, x) for o in tf32 for x in inputs if torch.is_tensor(x)
        )
        tf32 = [o.detach().contiguous() for o in tf32]
        tf32_finite = all(families.all_finite(o) for o in tf32)
        mark = lap("tf32", mark)
        self._draw_peak_carried = max(self._draw_peak_carried, _peak(self.device))
        _reset_peak(self.device)
        truth, truth_kind, truth_note = self._truth(inputs, tf32)
        truth_peak = _peak(self.device)
        mark = lap("float64", mark)
        sensitivity: list = [None] * len(truth)
        baselines: dict[str, list] = {}
        if self.keep == "truth" and truth_kind == "float64":
            floating = [t.is_floating_point() for t in truth]
            against_floor = None
            if deferrable and self.policy:
                # The TF32 baseline against the floor first (no sensitivity: its budget is the
                # floor); kept as its figures where it is within the floor everywhere.
                against_floor = [
                    _describe(o, t, None, self.policy) for o, t in zip(tf32, truth, strict=True)
                ]
                mark = lap("describe", mark)
            if against_floor is not None and all(
                _elements_over(b.get("vs_budget")) == 0
                for b, f in zip(against_floor, floating, strict=True)
                if f
            ):
                baselines["tf32"] = against_floor
                sensitivity = [DEFERRED if f else None for f in floating]
                # Its runs, when a candidate needs them: about the truth run's peak with the
                # float64 squares and outputs of a run beside the truth, and a private draw's
                # state (two, while one run's gives way to the next).
                truth_bytes = sum(shared.nbytes(t) for t in truth)
                state_bytes = sum(shared.nbytes(t) for t in self.initial_state.values())
                # (and the copies of a candidate's outputs over the floor, kept through them)
                output_bytes = sum(shared.nbytes(o) for o in tf32)
                # Runs in chunks of rows keep their private draw of the inputs through the run.
                held_inputs = (
                    sum(shared.nbytes(x) for x in inputs if torch.is_tensor(x))
                    if self._truth_chunks > 1
                    else 0
                )
                self._sensitivity_peak = max(
                    self._sensitivity_peak,
                    truth_peak + 2 * truth_bytes + 2 * state_bytes + output_bytes + held_inputs,
                )
            else:
                sensitivity = self._sensitivity_now(inputs, truth, sensitivity_seed)
                mark = lap("sensitivity", mark)
        if "tf32" not in baselines:
            # Only the baseline a candidate is judged beside (TF32) is measured against the
            # budget its candidates get.
            baselines["tf32"] = [
                _describe(o, t, s, self.policy)
                for o, t, s in zip(tf32, truth, sensitivity, strict=True)
            ]
        first_output = _audit_sample(tf32[0]), families.rms(tf32[0]), str(tf32[0].dtype)
        mark = lap("describe", mark)
        # Plain FP32 only for a protocol judged by it (`standard`): the judge and the plan read
        # the baselines of the variant a candidate is judged beside, and under `verified` and
        # `kbv-paper` that is TF32, so on a GPU a third forward of every case would be spent
        # on figures nobody reads.
        fp32 = tf32
        if self.keep == "fp32":
            if self.device.type == "cuda":
                numerics.set_tf32(False)
                try:
                    with self.plans.forward("fp32", "drawing a case"):
                        fp32, _ = hosting.as_outputs(
                            hosting.forward(self.model, inputs, self.device)
                        )
                finally:
                    numerics.set_tf32(True)
                fp32 = [o.detach().contiguous() for o in fp32]
            # (no TF32 on the CPU: both baselines are the same computation there)
            mark = lap("fp32", mark)
            baselines["fp32"] = [_describe(o, t) for o, t in zip(fp32, truth, strict=True)]
            lap("describe", mark)
        judged = {"truth": truth, "tf32": tf32, "fp32": fp32}[self.keep]
        # An output that is an input (or a view of one) would change with it: kept apart.
        judged = [o.clone() if _aliases_any(o, inputs) else o for o in judged]
        return {
            "judged": judged,
            "sensitivity": sensitivity,
            "baselines": baselines,
            "truth_kind": truth_kind,
            "truth_note": truth_note,
            "truth_chunks": self._truth_chunks if truth_kind == "float64" else 1,
            "truth_rows_note": self._truth_rows_note if truth_kind == "float64" else "",
            "structure": structure,
            "aliases": aliases,
            "tf32_finite": tf32_finite,
            "first_output": first_output,
        }

    def _truth(self, inputs: list, fp32: list[torch.Tensor]):
        """float64 run of the reference; when the problem cannot run in float64, the plain
        FP32 run stands in (recorded per case). A float64 run that does not fit in device
        memory is tried again with every case not in use let go, then falls back the same way,
        recorded with its reason."""
        assert self.model is not None
        evicted = False
        while True:
            try:
                return self._float64_run(inputs, fp32), "float64", None
            except Exception as error:  # noqa: BLE001 - out of memory, or an op without float64
                if _out_of_memory(error):
                    _release_cached(self.device)
                    if not evicted:
                        evicted = True
                        self._evict(0, everything=True)
                        continue
                    if self._capped:
                        # Drawn ahead under a cap: its evaluation draws it again uncapped, rather
                        # than keep a truth that only the cap made float32.
                        raise
                    note = f"the float64 run did not fit in device memory: {str(error)[:200]}"
                    return [o.detach() for o in fp32], "float32", note
                if self._model64_kind == "copy":
                    # A copy keeps what the model's code captured (a lambda over a submodule,
                    # as minGPT's block has): a model built anew captures its own float64 parts.
                    self.model64, self._model64_kind = None, "constructed"
                    # Its rows are shown again: a probe of the broken copy showed nothing.
                    self._row_plan, self._row_plan_decided, self._row_plan_note = None, False, ""
                    continue
                note = (
                    "the problem does not run in float64: "
                    f"{type(error).__name__}: {str(error)[:200]}"
                )
                return [o.detach() for o in fp32], "float32", note

    def _new_float64_model(self) -> torch.nn.Module:
        """The reference model in float64: a deep copy (the model as it is), or, once a copy has
        failed to run, the model built anew from the problem's construction (under the same seed,
        the global generators put back after it); its state is loaded from the model before each
        run either way. Float tensors the model keeps as plain attributes (not parameters or
        buffers: an initial hidden state, a constant) become float64 too, as `.to` leaves them."""
        assert self.model is not None
        if self._model64_kind == "copy":
            model64 = copy.deepcopy(self.model)
        else:
            model_cls, init_inputs = self._construction
            with _torch_generators_kept(self.device):
                hosting.seeded(hosting.CONSTRUCT_SEED)
                model64 = construct(model_cls, copy.deepcopy(init_inputs), "problem")
            model64 = model64.to(self.device).eval()
        model64 = model64.to(torch.float64)
        for module in model64.modules():
            for name, value in list(vars(module).items()):
                if torch.is_tensor(value) and value.is_floating_point():
                    setattr(module, name, value.to(torch.float64))
        return model64

    def _float64_run(self, inputs: list, fp32: list[torch.Tensor]) -> list[torch.Tensor]:
        assert self.model is not None
        params.load_into(
            self._float64_model(),
            params.state_tensors(self.model),
            {k: k for k in params.state_tensors(self.model)},
        )
        self._truth_chunks = 1
        plan = self._rows_of(inputs, fp32)
        self._truth_rows_note = self._row_plan_note
        out = None
        if plan is not None and not plan.holds_for(inputs):
            plan = None
            self._truth_rows_note = "this case's inputs are not the shapes its plan was made for"
        if plan is not None:
            try:
                out = row_chunks.run_into(plan, inputs, _to_float64, self._forward64)
                mixed = row_chunks.window_differs(
                    plan, inputs, _to_float64, self._forward64, out, self._chunked_runs
                )
                self._chunked_runs += 1
            except Exception as error:  # noqa: BLE001 - a chunk the probe's rows did not foresee
                if _out_of_memory(error):
                    raise
                # This case alone goes whole: the plan (and what the memory plan reserved after
                # the first draw, in chunks) stays for the others.
                out, mixed = None, ""
                self._truth_rows_note = (
                    f"the run in chunks of rows failed on this case, so it went whole: "
                    f"{type(error).__name__}: {str(error)[:200]}"
                )
            if mixed:
                # The probe's case hid it: rows mix on this one. Whole from now on (a run larger
                # than the first draws reserved for may run out of memory: a harness fault,
                # evaluated again alone, never a truth from mixed rows).
                out = None
                self._row_plan = None
                self._row_plan_note = self._truth_rows_note = mixed
            elif out is not None:
                self._truth_chunks = len(plan.slices())
        if out is None:
            inputs64 = [_to_float64(x) for x in inputs]
            out = self._forward64(inputs64)
            del inputs64
        if [o.shape for o in out] != [o.shape for o in fp32]:
            raise ValueError("float64 run changed the output structure")
        return [o.contiguous() for o in out]

    def _forward64(self, inputs64: list) -> list[torch.Tensor]:
        assert self.model64 is not None
        # Transposed convolutions through PyTorch's own path on the GPU, a tenth of cuDNN's
        # float64 time (float64_convs); entered only for a model that holds one.
        routing = (
            float64_convs.NativeTransposedConvs()
            if self.device.type == "cuda" and float64_convs.has_transposed_convs(self.model64)
            else contextlib.nullcontext()
        )
        with torch.no_grad(), _float64_defaults(), routing:
            out, _ = hosting.as_outputs(self.model64(*inputs64))
        _require_tensors(out)
        return [o.detach() for o in out]

    def _rows_of(self, inputs: list, outputs: list) -> row_chunks.RowPlan | None:
        """The session's plan for float64 runs in chunks of rows (row_chunks), decided on its
        first truth run: from the shapes, then shown on these inputs by the probe."""
        if not self._row_plan_decided:
            plan, why = row_chunks.candidate_plan(inputs, outputs, row_chunks.chunk_bytes())
            if plan is not None:
                plan, why = row_chunks.probe(
                    plan, inputs, _to_float64, self._forward64, _out_of_memory
                )
                self._row_plan_note = why  # a problem large enough to chunk that runs whole
            self._row_plan, self._row_plan_decided = plan, True
        return self._row_plan

    def _sensitivity_now(self, inputs: list, truth: list[torch.Tensor], seed: int) -> list:
        """The sensitivity measured at the draw: from `inputs` as they are, under the state the
        model holds (the case's, loaded by _draw_case, before any candidate saw either)."""
        self._require_room()
        state = params.state_tensors(self.model)
        return self._with_room(
            lambda: self._sensitivity(lambda: (inputs, state, lambda: None), truth, seed)
        )

    def _sensitivity(
        self,
        draw_run: Callable[[], tuple],
        truth: list[torch.Tensor],
        seed: int,
        in_chunks: bool = True,
    ) -> list[torch.Tensor | None]:
        """Each floating output element's own sensitivity to rounding: the RMS over
        SENSITIVITY_RUNS float64 runs of |f64(perturbed) - truth|, every float input and
        parameter element scaled by (1 + u * r) with r standard normals (drawn from `seed`) and u
        the precision class's unit roundoff. To first order it is u times the element's
        condition term (sum_k |x_k w_k|-like for a dot product) for any model, so the budget
        opens exactly where large terms cancel. Kept as float32 (one more output-sized tensor
        per case; docs/elementwise-budget.md). `draw_run()` gives each run its (inputs, state,
        release): release() is called once the run's perturbed copies are made (after the run
        where it goes in chunks of rows, which read the inputs chunk by chunk)."""
        self._float64_model()  # let go by _with_room when a first try ran out of memory
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        u = self.roundoff

        def perturbed(t: torch.Tensor) -> torch.Tensor:
            # 1 + u * r, r standard normal, drawn straight into one float64 tensor of t's size
            # and multiplied by t in place (a float32 input is promoted there, not copied to
            # float64 first): a level-1 input is up to 17 GB, so no extra temporaries.
            factor = torch.empty(t.shape, dtype=torch.float64, device=t.device)
            torch.randn(factor.shape, generator=gen, dtype=torch.float64, out=factor)
            return factor.mul_(u).add_(1.0).mul_(t)

        floating = [o.is_floating_point() for o in truth]
        squares = [torch.zeros_like(t) if f else None for t, f in zip(truth, floating, strict=True)]

        def accumulate(rows: slice | None, out: list[torch.Tensor]) -> None:
            # `rows` of every output (None: the whole of each, a 0-d loss included).
            for sq, o, t in zip(squares, out, truth, strict=True):
                if sq is not None:
                    # In place: one float64 output-sized temporary at most, not three.
                    d = o.to(torch.float64)
                    if rows is None:
                        sq.add_(d.sub_(t).square_())
                    else:
                        sq[rows].add_(d.sub_(t[rows]).square_())
                    del d

        def perturbed_input(x: Any) -> Any:
            return perturbed(x) if families.is_float(x) else x

        # In chunks of rows where the truth was (row_chunks): each split input perturbed a chunk
        # at a time, so a run holds its draw and one chunk's float64 copy, not a float64 copy
        # of the whole inputs.
        plan = self._row_plan if self._row_plan_decided and in_chunks else None
        state: dict[str, torch.Tensor] = {}
        failed: BaseException | None = None
        try:
            for _ in range(SENSITIVITY_RUNS):
                state = {}  # the last run's (a private draw's) goes before the next is drawn
                inputs, state, release = draw_run()
                try:
                    params.load_into(self.model64, state, {k: k for k in state})
                    with torch.no_grad():
                        for t in params.state_tensors(self.model64).values():
                            if t.is_floating_point():
                                t.copy_(perturbed(t))
                        if plan is not None and plan.holds_for(inputs):
                            row_chunks.run(
                                plan, inputs, perturbed_input, self._forward64, accumulate
                            )
                            continue
                        inputs64 = [perturbed_input(x) for x in inputs]
                finally:
                    del inputs
                    release()
                out = self._forward64(inputs64)
                del inputs64
                accumulate(None, out)
                del out
        except Exception as error:  # noqa: BLE001 - only a run in chunks is tried again
            if plan is None or _out_of_memory(error):
                raise
            failed = error
        finally:
            # The float64 model is shared with the next truth run: back to the exact state
            # (each truth run loads its own state as well).
            if state:
                params.load_into(self.model64, state, {k: k for k in state})
        if failed is not None:
            # As the truth does: a run in chunks that fails goes whole (all eight again, from
            # the same seed, so the measurement is still the same for the same case).
            del squares
            return self._sensitivity(draw_run, truth, seed, in_chunks=False)
        result: list[torch.Tensor | None] = []
        for i, sq in enumerate(squares):
            squares[i] = None  # each float64 sum goes as soon as its float32 copy is made
            if sq is None:
                result.append(None)
                continue
            s = sq.div_(SENSITIVITY_RUNS).sqrt_().to(torch.float32)
            del sq
            # Where a perturbed run is not finite the sensitivity says nothing: the floor decides.
            # In place: a copy was one more output-sized tensor at the sensitivity's peak, the
            # 8 GiB that 87_conv_pointwise_2D's draw alone on an 80 GB H100 ran out of (session
            # 33).
            result.append(s.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0).contiguous())
        return result

    def _audit_figures(self, first_output) -> dict[str, Any]:
        """What the problem audit needs of this case: its output's RMS and how far its output
        (a strided sample) is from the first case's."""
        sample, output_rms, dtype = first_output
        figures: dict[str, Any] = {"output_rms": _finite_or_str(output_rms)}
        if self.first_sample is None:
            self.first_sample = sample
            figures["first"] = True
        elif sample.shape != self.first_sample.shape:
            figures["sample_diff_from_first"] = "inf"
        else:
            a, b = sample, self.first_sample
            if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
                figures["sample_diff_from_first"] = "inf"
            else:
                finite = torch.isfinite(a)
                diff = (a[finite] - b[finite]).abs().max() if bool(finite.any()) else 0.0
                figures["sample_diff_from_first"] = float(diff)
        figures["sample_elements"] = int(sample.numel())
        figures["dtype"] = dtype
        return figures

    # -- the store ----------------------------------------------------------------------------
    def _require_room(self) -> None:
        """The sensitivity's float64 runs start only where the evaluation reserved memory for
        them; else the harness is told to make room (WorkerExchange::reference)."""
        if not self._sensitivity_room:
            raise WorkerError(
                "sensitivity_room",
                "the sensitivity's float64 runs need device memory the evaluation has not "
                "reserved yet",
            )

    def _with_room(self, make):
        """`make()`, tried again when the device ran out of memory: first with every case not in
        use let go (the cases kept for later candidates are only a cache), then with the float64
        model let go too (a copy, made again by the next float64 run; where that no longer fits,
        the truth falls back to float32, recorded), then with the model and its initial state
        moved to the host and back (_compact). Without the second step, on an 80 GB H100 with
        the device to itself, a draw of `2_ShallowWideMLP` (8.6 GB of weights: the model, its
        initial state and shared block, the float64 copy at twice that) ran out of memory for
        one redrawn state block (session 23); without the third, it ran out with 40 GiB free
        in torch's cache, in segments a live tensor shared (session 24). A failure after all
        three is the harness's out-of-memory (never the candidate's)."""
        steps = (
            lambda: self._evict(0, everything=True),
            self._let_float64_model_go,
            self._compact,
        )
        for let_go in steps:
            try:
                return make()
            except (torch.OutOfMemoryError, RuntimeError) as error:
                if not _out_of_memory(error):
                    raise
            let_go()
        return make()

    def _compact(self) -> None:
        """The model and its initial state to the host and back, the cache emptied between: a
        freed range of torch's cache that shares a segment with a live tensor cannot go back to
        the device (`empty_cache` returns whole segments only), and the cases' shared blocks,
        kbv's own VMM allocations, cannot use it. Moved out, the long-lived tensors free their
        segments; moved back, each lands in a segment of its own size. Seconds for a large model
        (a copy each way), on this path only; the values are unchanged. The allocator's setting
        stays torch's default, as the candidate's: the reference's timings and memory figures
        are measured as the candidate's are."""
        if self.device.type != "cuda" or self.model is None or self._model_on_host:
            return
        torch.cuda.synchronize(self.device)
        host = torch.device("cpu")
        self.model.to(host)
        self.initial_state = {k: v.to(host) for k, v in self.initial_state.items()}
        # Loaded on the host until placed back: should that fail, the next command that needs
        # the model places it again (before_command), as for a session loaded ahead.
        self._model_on_host = True
        self.compactions += 1
        _release_cached(self.device)
        self.cmd_place_model({})

    def _let_float64_model_go(self) -> None:
        self.model64 = None
        _release_cached(self.device)

    def _float64_model(self) -> torch.nn.Module:
        """The float64 copy of the model, made when first needed or again after _with_room let
        it go."""
        if self.model64 is None:
            self.model64 = self._new_float64_model()
        return self.model64

    def holding(self) -> dict[str, Any]:
        """What this worker holds, in bytes, by what it is for: sent with an out-of-memory error
        (kbv.worker), so that a fault says whose memory ran out (its cases, its float64 model,
        the blocks made for one candidate, or other processes', what the device had free)."""
        cases = list(self.cases.values())

        def tensors_bytes(values) -> int:
            return sum(shared.nbytes(t) for t in values if torch.is_tensor(t))

        held: dict[str, Any] = {
            "cases": len(cases),
            "pinned": sum(1 for c in cases if c.pins > 0),
            "case_bytes": sum(c.resident_bytes for c in cases),
            "block_bytes": sum(b.layout["nbytes"] for b in self.blocks.values()),
            "slot_bytes": self.slot.layout["nbytes"] if self.slot is not None else 0,
            "timing_judged_bytes": sum(tensors_bytes(ts) for ts in self.timing_judged),
            "model_bytes": memory.state_bytes(self.model) if self.model is not None else 0,
            "model64_bytes": memory.state_bytes(self.model64) if self.model64 is not None else 0,
            "initial_state_bytes": tensors_bytes(self.initial_state.values()),
            "initial_block_bytes": (
                self.initial_block.layout["nbytes"] if self.initial_block is not None else 0
            ),
            "compactions": self.compactions,
        }
        if self.device.type == "cuda":
            held["torch_allocated_bytes"] = torch.cuda.memory_allocated(self.device)
            held["torch_reserved_bytes"] = torch.cuda.memory_reserved(self.device)
            # Fixed segments keep a freed range that shares a segment with a live tensor
            # (_compact); expandable ones, where the user asked for them, do not.
            held["torch_segments"] = _segment_kind(self.device)
            free, total = torch.cuda.mem_get_info(self.device)
            held["device_free_bytes"], held["device_total_bytes"] = free, total
        return held

    def holding_words(self) -> str:
        """holding(), in one line for a harness fault's detail."""
        return describe_holding(self.holding())

    def _resident(self, case_id: str) -> Case:
        case = self.cases.get(case_id)
        if case is None:
            raise WorkerError("internal_error", f"case {case_id} is not resident")
        return case

    def _block(self, token: str) -> shared.Block:
        block = self.blocks.get(token)
        if block is None:
            for case in self.cases.values():
                if case.inputs.token == token:
                    return case.inputs
            raise WorkerError("internal_error", f"no shared block {token}")
        return block

    def _resident_bytes(self) -> int:
        return sum(c.resident_bytes for c in self.cases.values())

    def _evict(self, incoming: int, everything: bool = False) -> None:
        """Lets go of the least recently used cases not in use until the rest fits the budget
        (`everything`: all of them). The most recently prepared case always stays: it is the
        one about to be shared (a budget of 0 streams one case at a time)."""
        ids = list(self.cases)
        for case_id in ids[:-1] if ids and not everything else ids:
            if not everything and self._resident_bytes() + incoming <= self.cache_bytes:
                break
            if self.cases[case_id].pins == 0:
                self._drop(case_id)
        _release_cached(self.device)

    def _drop(self, case_id: str) -> None:
        case = self.cases.pop(case_id, None)  # (a retired initial block may have taken it)
        if case is not None:
            case.close()

    def _initial_block(self) -> shared.Block | None:
        """The initial state in a block shared by every native case and the timing sets; made
        again from the private initial state when a candidate's thread has written into it."""
        if self.initial_block is not None:
            if self._state_checksums(self.initial_block.as_dict()) != self._initial_checksums():
                self._retire_initial_block()
        if self.initial_block is None and self.initial_state:
            self.initial_block = shared.allocate(self.initial_state, self.device)
            self.initial_block.layout["owned"] = False  # shared by every native case
        return self.initial_block

    def _retire_initial_block(self) -> None:
        """The shared initial block was written into: the next native case gets a new one made
        from the private initial state. Cases kept with the old one go (unless in use: they fail
        their check when prepared again), and the old block is closed once none holds it."""
        old, self.initial_block = self.initial_block, None
        for case_id in [i for i, c in self.cases.items() if c.state is old and c.pins == 0]:
            self._drop(case_id)
        if old is not None and not any(c.state is old for c in self.cases.values()):
            old.close()

    def _initial_checksums(self) -> dict[str, int]:
        if self._initial_sums is None:
            self._initial_sums = self._state_checksums(self.initial_state)
        return self._initial_sums

    def _checksum(self, t: torch.Tensor) -> int:
        return self._checksum_all([t])[0]

    def _checksum_all(self, tensors: list[torch.Tensor]) -> list[int]:
        """The checksums of tensors of this device, one wait for them all: a model's state is
        hundreds of tensors, and each wait on a GPU other processes share costs a time slice."""
        import kbv_native

        return kbv_native.checksums(
            [(t.data_ptr(), shared.nbytes(t)) for t in tensors],
            shared.device_index(self.device),
            self.checksum_key,
            _stream(self.device),
        )

    def _state_checksums(self, state: dict[str, torch.Tensor]) -> dict[str, int]:
        """Keyed checksums of a state by name, each tensor's values in order (a non-contiguous
        parameter of the model read like its contiguous copy in a block)."""
        contiguous = [v.contiguous() for v in state.values()]  # alive until the sums are in
        return dict(zip(state, self._checksum_all(contiguous), strict=True))

    def _checksums(self, block: shared.Block) -> dict[Any, int]:
        pairs = block.tensors()
        sums = self._checksum_all([t for _, t in pairs])
        return {key: value for (key, _), value in zip(pairs, sums, strict=True)}

    def _changed_inputs(self, block: shared.Block, expected: dict[Any, int]) -> list[Any]:
        now = self._checksums(block)
        return [key for key, value in now.items() if expected.get(key) != value]

    def _unchanged(self, case: Case) -> bool:
        """A kept case is checked before reuse: a candidate's thread may have written into
        its inputs after its own check, or into its state (mapped writable in the candidate's
        process as well, and loaded by the next candidate: an honest one would fail on weights
        a hostile predecessor changed)."""
        if self._changed_inputs(case.inputs, case.checksums):
            return False
        if case.state is None or not case.state_checksums:
            return True
        if self._state_checksums(case.state.as_dict()) == case.state_checksums:
            return True
        if case.state is self.initial_block:
            self._retire_initial_block()
        return False


# -- helpers ----------------------------------------------------------------------------------
def _perturb_one_element(inputs: list, secret: str, family: str, draw: int) -> dict | None:
    """Changes one element of the largest floating-point input in place (the perturbed re-check,
    src/eval/phase_correctness.cpp): at a secret prime index in the middle half of its elements,
    so that a sampler reading every s-th element from the start (any s >= 2 short of that
    prime) or the first and last ones never sees it, and by the tensor's own L2 norm, so that
    the output moves well beyond the tolerance. A candidate that returns the plain case's output
    for these inputs has served a stored answer."""
    floats = [(i, x) for i, x in enumerate(inputs) if families.is_float(x) and x.numel() >= 64]
    if not floats:
        return None
    index, tensor = max(floats, key=lambda item: item[1].numel())
    n = tensor.numel()
    rng = random.Random(families.derive_seed(secret, "perturb", family, draw))
    position = _prime_between(n // 4, (3 * n) // 4, rng)
    if position is None:
        return None
    flat = tensor.view(-1) if tensor.is_contiguous() else None
    if flat is None:
        return None
    norm = float(families.rms(tensor)) * math.sqrt(n)
    delta = max(1.0, norm)
    flat[position] += delta
    return {"input": index, "position": position, "delta": delta}


def _prime_between(low: int, high: int, rng: random.Random) -> int | None:
    """A random prime in [low, high) (None if it holds none worth the search)."""
    if high - low < 2:
        return None
    for _ in range(400):
        candidate = rng.randrange(max(low, 2), high) | 1
        if candidate < high and _is_prime(candidate):
            return candidate
    return None


def _is_prime(n: int) -> bool:
    if n < 2 or n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0


def _tensor_ref(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), shared.dtype_name(t.dtype), list(t.shape), shared.device_index(t.device))


def _describe(
    reference: torch.Tensor,
    truth: torch.Tensor,
    sensitivity: torch.Tensor | None = None,
    policy: str = "",
) -> dict[str, Any]:
    """One output's baseline (check::OutputBaseline): dtype and shape, the truth's scale, and
    the baseline against the truth, measured where the tensors are; with a policy, also against
    the elementwise budget its candidates get (with the truth's sensitivity where there is one)."""
    import kbv_native

    sens = None
    if sensitivity is not None and policy:
        sens = (
            sensitivity.data_ptr(),
            shared.dtype_name(sensitivity.dtype),
            sensitivity.numel(),
            shared.device_index(sensitivity.device),
        )
    return kbv_native.describe_output(
        _tensor_ref(reference), _tensor_ref(truth), _stream(reference.device), sens, policy
    )


def _spec_sens(spec: dict[str, Any]) -> float:
    value = spec.get("sens", 0.0)
    return float("inf") if value == "inf" else float(value) if value != "nan" else 0.0


def _sensitivity_bytes(sensitivity: list, judged: list[torch.Tensor]) -> int:
    """The sensitivity's float32 bytes, counted for a DEFERRED one too: measured later, it
    stays resident beside its truth all the same."""
    return sum(4 * t.numel() for s, t in zip(sensitivity, judged, strict=False) if s is not None)


def _sensitivity_state(sensitivity: list) -> str:
    """How a case's (or timing set's) sensitivity stands: none, measured, or deferred."""
    if all(s is None for s in sensitivity):
        return "none"
    return "deferred" if any(s is DEFERRED for s in sensitivity) else "measured"


def _elements_over(measurement: dict[str, Any] | None) -> int:
    """Elements over their budget in a measure() result (0 where there is none)."""
    return int(((measurement or {}).get("figures") or {}).get("elements_over", 0))


def _over_floor(measurement: dict[str, Any], judge_pass: dict[str, Any]) -> bool:
    """Whether a pass measured against the floor alone (its sensitivity deferred) needs the
    sensitivity: some element over the elementwise floor, or the normwise error over the pass's
    normwise budget before the sensitivity opens it (`norm_budget`, absent: no such budget)."""
    figures = measurement.get("figures") or {}
    if int(figures.get("nonfinite_mismatches", 0)) > 0:
        return False  # it fails whatever the sensitivity: no runs for it
    if _elements_over(measurement) > 0:
        return True
    if "norm_budget" not in judge_pass:
        return False
    # float() reads kbv's JSON figures as written: a number, or "nan", "inf", "-inf".
    return float(figures.get("normwise_rel", 0.0)) > float(judge_pass["norm_budget"])


def _measure(
    candidate: torch.Tensor,
    judged: torch.Tensor,
    spec: dict[str, Any],
    sensitivity: torch.Tensor | None = None,
) -> dict:
    import kbv_native

    x = (
        candidate.data_ptr(),
        shared.dtype_name(candidate.dtype),
        candidate.numel(),
        shared.device_index(candidate.device),
    )
    y = (
        judged.data_ptr(),
        shared.dtype_name(judged.dtype),
        judged.numel(),
        shared.device_index(judged.device),
    )
    s = None
    if sensitivity is not None:
        s = (
            sensitivity.data_ptr(),
            shared.dtype_name(sensitivity.dtype),
            sensitivity.numel(),
            shared.device_index(sensitivity.device),
        )
    return kbv_native.measure(x, y, spec, _stream(judged.device), s)


def _as_on(description: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """A tensor described on the meta device, as it will be drawn: on `device`."""
    if "device" in description:
        description["device"] = str(device)
    return description


def _aliases_any(o: torch.Tensor, inputs: list) -> bool:
    return any(hosting.shares_storage(o, x) for x in inputs if torch.is_tensor(x))


def _audit_sample(t: torch.Tensor) -> torch.Tensor:
    flat = t.reshape(-1)
    stride = max(1, flat.numel() // AUDIT_SAMPLE)
    return flat[::stride][:AUDIT_SAMPLE].to("cpu", torch.float64)


def _finite_or_str(value: float) -> float | str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value


def _memory_now(device: torch.device) -> dict[str, int | str]:
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        # The GPU by its UUID, which the driver's process list (NVML) is keyed by whatever
        # CUDA_VISIBLE_DEVICES says: src/eval/held_memory.hpp reads it there.
        uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
        return {"kind": "device", "free_bytes": free, "total_bytes": total, "uuid": uuid}
    available = 0
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        pass
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"kind": "host", "free_bytes": available, "total_bytes": total}


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


_JUDGED = ("id", "timing", "token", "passes")
# An output whose bytes changed between its measure and what the sensitivity would judge.
_CHANGED_WHILE_JUDGED = "floor: the output changed while it was judged"


def _judge_key(request: dict[str, Any]) -> str:
    """What a judge request judges (not its sequence number, nor whether it had room): the same
    request sent again once room was made has the same key."""
    return json.dumps({k: request.get(k) for k in _JUDGED}, sort_keys=True)


def _union(first: list, second: list) -> list:
    return list(first) + [x for x in second if x not in first]


def _peak(device: torch.device) -> int:
    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else 0


def _allocated(device: torch.device) -> int:
    return int(torch.cuda.memory_allocated(device)) if device.type == "cuda" else 0


def _torch_generators_kept(device: torch.device):
    """torch's CPU generator and `device`'s (a GPU's) as they were, once the block is done."""
    return torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else [])


@contextlib.contextmanager
def _float64_defaults():
    """The float64 model's forward with float64 as the default dtype: a tensor its code makes
    without a dtype (KernelBench's level3/35_LSTM draws its initial hidden state with
    `torch.randn(..., device=x.device)`, others build constants with `torch.full` or
    `torch.tensor`) is float64 like the rest of the run, not a float32 that an operator such as
    nn.LSTM refuses beside float64 weights or that rounds the truth to float32. Put back after
    the forward, failed or not: the TF32 runs keep the problem's own defaults."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _to_float64(x: Any) -> Any:
    return x.to(torch.float64) if families.is_float(x) else x


def describe_holding(held: dict[str, Any]) -> str:
    """A reference worker's holding() in words: what it kept, by what for, in GiB."""

    def gib(key: str) -> str:
        return f"{held.get(key, 0) / 2**30:.2f} GiB"

    parts = [
        f"{held['cases']} cases ({held['pinned']} pinned) {gib('case_bytes')}",
        f"blocks made for the candidate {gib('block_bytes')}",
        f"the output slot {gib('slot_bytes')}",
        f"timing sets' judged outputs {gib('timing_judged_bytes')}",
        f"the model {gib('model_bytes')}",
        f"its initial state {gib('initial_state_bytes')} and shared block "
        f"{gib('initial_block_bytes')}",
        f"the float64 model {gib('model64_bytes')}",
        f"moved out and back {held.get('compactions', 0)} times",
    ]
    words = "the reference held " + ", ".join(parts)
    if "torch_allocated_bytes" in held:
        words += (
            f"; torch's allocator {gib('torch_allocated_bytes')} allocated of "
            f"{gib('torch_reserved_bytes')} reserved in {held.get('torch_segments', 'no')} "
            f"segments; the device had {gib('device_free_bytes')} "
            f"free of {gib('device_total_bytes')}"
        )
    return words


def _segment_kind(device: torch.device) -> str:
    """How torch's caching allocator holds this device's memory: "expandable" segments give a
    freed range back to the device, "fixed" ones only when the whole segment is free."""
    index = shared.device_index(device)
    kinds = {
        "expandable" if segment.get("is_expandable", False) else "fixed"
        for segment in torch.cuda.memory_snapshot()
        if segment.get("device", index) == index
    }
    return " and ".join(sorted(kinds)) or "no"


def _release_cached(device: torch.device) -> None:
    """Freed blocks go back to the device: the candidate's process needs them, and torch's
    caching allocator would otherwise keep them for this one."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _out_of_memory(error: BaseException) -> bool:
    """Memory ran out, in torch's words or a library's (cuBLAS's, cuDNN's, a raw allocation's):
    the worker's own reading, which the orchestrator is told too."""
    from .worker import exhausted_resource

    return exhausted_resource(error) == "out_of_memory" or "OUT_OF_MEMORY" in str(error)


def _require_tensors(outputs: list) -> None:
    for value in outputs:
        if not isinstance(value, torch.Tensor):
            raise WorkerError(
                "problem_error", f"the reference forward returned a {type(value).__name__}"
            )
