"""The reference's own cap on its device allocations (`cap_memory`), which a session drawn ahead
of its evaluation sets to what it reserved of the device's ahead share (src/eval/reference_work
.cpp, permit_ahead): over it the draw runs out of memory in the reference's own process, not in
another evaluation's, and lifting it gives the evaluation the device again. On the host there is
nothing to cap; the GPU twin runs where kbv_native has CUDA and a GPU is present."""

from __future__ import annotations

import textwrap

import pytest
import torch  # before kbv_native: the module must share torch's CUDA runtime
from conftest import import_native_or_skip_module

kn = import_native_or_skip_module()

from kbv import reference  # noqa: E402
from kbv.loading import WorkerError  # noqa: E402

GPU = bool(getattr(kn, "has_cuda", False)) and torch.cuda.is_available()

# Scores of 64 x 4096 x 4096 float32 (4 GiB) from 64 MiB of inputs on the GPU: a draw far above
# its inputs (one batch on the host, where only the command's answer is on trial).
ATTENTION_LIKE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, q):
        return torch.softmax(q @ q.transpose(-1, -2), dim=-1).sum(dim=-1)


def get_inputs():
    return [torch.randn(BATCH, 4096, 64)]


def get_init_inputs():
    return []
"""

CASE = {"id": "native-0", "family": "native", "draw": 0, "redraw": [], "secret": "cap-test"}


def _role(tmp_path, device: str) -> reference.ReferenceRole:
    problem = tmp_path / "problem.py"
    batch = 64 if device == "cuda" else 1
    problem.write_text(textwrap.dedent(ATTENTION_LIKE).replace("BATCH", str(batch)))
    role = reference.ReferenceRole()
    role.cmd_load_problem({"device": device, "problem": str(problem)})
    role.cmd_set_plan({"cache_bytes": 0})
    return role


def _close(role) -> None:
    role.cmd_end_candidate({})
    role._evict(0, everything=True)


def test_on_the_host_there_is_nothing_to_cap(tmp_path):
    role = _role(tmp_path, "cpu")
    try:
        assert role.cmd_cap_memory({"bytes": 1 << 20}) == {"capped": False}
        role.cmd_prepare_case(CASE)  # drawn as ever
    finally:
        _close(role)


@pytest.mark.skipif(not GPU, reason="no GPU or no CUDA build")
def test_a_capped_draw_runs_out_of_its_own_memory_and_the_lifted_one_does_not(tmp_path):
    role = _role(tmp_path, "cuda")
    try:
        capped = role.cmd_cap_memory({"bytes": 1 << 30})  # 1 GiB: below the 4 GiB of scores
        assert capped["capped"] and 0 < capped["fraction"] < 1
        with pytest.raises(WorkerError) as error:
            role.cmd_prepare_case(CASE)
        assert "out of memory" in str(error.value).lower() or error.value.kind == "runtime_error"
        lifted = role.cmd_cap_memory({"bytes": 0})
        assert (lifted["capped"], lifted["fraction"]) == (False, 1.0)
        assert not role.cases  # nothing kept of the draw that ran out
        role.cmd_prepare_case(CASE)
        assert role.cases["native-0"].figures["truth"] == "float64"
    finally:
        _close(role)


def test_a_capped_float64_run_that_does_not_fit_fails_the_draw_rather_than_fall_back(
    tmp_path, monkeypatch
):
    """Under the cap of a draw ahead, a float64 run out of memory is not the recorded float32
    fallback (a truth only the cap degraded): the draw fails, and its evaluation draws it again
    uncapped. Uncapped, the fallback stands as before."""
    role = _role(tmp_path, "cpu")
    try:

        def short_of_memory(inputs, fp32):
            raise RuntimeError("CUDA error: out of memory")

        monkeypatch.setattr(role, "_float64_run", short_of_memory)
        monkeypatch.setattr(role, "_evict", lambda incoming, everything=False: None)
        inputs, fp32 = [torch.randn(4, 8)], [torch.zeros(4)]
        assert role._truth(inputs, fp32)[1] == "float32"
        role._capped = True  # as cmd_cap_memory sets it on a GPU
        with pytest.raises(RuntimeError, match="out of memory"):
            role._truth(inputs, fp32)
    finally:
        _close(role)


# -- a model loaded ahead stays on the host until the device's memory is reserved for it -------


def test_a_model_loaded_with_place_host_is_placed_by_the_first_command_that_uses_it(tmp_path):
    """On the CPU the placement moves nothing, but the exchange is the GPU's: `placed` says the
    model waits, and the first command that uses it places it."""
    problem = tmp_path / "problem.py"
    problem.write_text(textwrap.dedent(ATTENTION_LIKE).replace("BATCH", "1"))
    role = reference.ReferenceRole()
    loaded = role.cmd_load_problem({"device": "cpu", "problem": str(problem), "place": "host"})
    try:
        assert loaded["placed"] == "host" and role._model_on_host
        assert loaded["memory"]["kind"] == "host" and "environment" in loaded
        # Loaded off the device (kbv run's session started ahead): the device's facts come
        # apart, and reading them leaves the model where it is.
        apart = reference.ReferenceRole()
        off = apart.cmd_load_problem(
            {"device": "cpu", "problem": str(problem), "place": "host", "device_facts": False}
        )
        assert "memory" not in off and "environment" not in off and off["placed"] == "host"
        apart.before_command("device_facts")
        facts = apart.cmd_device_facts({})
        assert apart._model_on_host and facts["memory"]["kind"] == "host"
        assert facts["environment"]["torch"] == loaded["environment"]["torch"]
        role.cmd_set_plan({"cache_bytes": 0})
        role.before_command("set_plan")
        assert role._model_on_host
        role.before_command("prepare_case")
        assert not role._model_on_host
        role.cmd_prepare_case(CASE)
    finally:
        _close(role)
    plain = reference.ReferenceRole()
    assert plain.cmd_load_problem({"device": "cpu", "problem": str(problem)})["placed"] == "device"


def test_a_model_left_on_the_host_is_placed_before_the_first_command_that_uses_it(
    tmp_path, monkeypatch
):
    """The lazy half, on the CPU: whatever command an evaluation sends first (the worker's loop
    calls before_command), a model still on the host is placed first; commands that never touch
    the model leave it where it is."""
    role = _role(tmp_path, "cpu")
    try:
        placed = []
        real_place = role.cmd_place_model
        monkeypatch.setattr(role, "cmd_place_model", lambda r: placed.append(1) or real_place(r))
        role._model_on_host = True  # as cmd_load_problem leaves it with `place: host`
        for cmd in ("ping", "cap_memory", "place_model", "load_problem", "device_facts"):
            role.before_command(cmd)
        assert placed == [] and role._model_on_host
        role.before_command("prepare_case")
        assert placed == [1] and not role._model_on_host
        role.cmd_prepare_case(CASE)
        role.before_command("judge")
        assert placed == [1]  # once
    finally:
        _close(role)


def test_the_worker_loop_asks_the_role_before_each_command():
    from kbv import worker

    class FakeChannel:
        def __init__(self, requests):
            self.requests, self.sent = list(requests), []

        def receive(self):
            return self.requests.pop(0) if self.requests else None

        def send(self, message, fds=None):
            self.sent.append(message)

    class Role:
        def __init__(self):
            self.log = []

        def before_command(self, cmd):
            self.log.append(("before", cmd))

        def cmd_work(self, request):
            self.log.append(("work", request["seq"]))
            return {"done": True}

    role, channel = Role(), FakeChannel([{"cmd": "work", "seq": 1}, {"cmd": "work", "seq": 2}])
    worker.serve(role, channel)
    assert role.log == [("before", "work"), ("work", 1), ("before", "work"), ("work", 2)]
    assert [m["ok"] for m in channel.sent] == [True, True]


@pytest.mark.skipif(not GPU, reason="no GPU or no CUDA build")
def test_a_model_loaded_with_place_host_takes_no_device_memory_until_placed(tmp_path):
    problem = tmp_path / "problem.py"
    problem.write_text(
        textwrap.dedent(
            """
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8192, 8192)  # 256 MiB of weights

                def forward(self, x):
                    return self.fc(x)


            def get_inputs():
                return [torch.randn(4, 8192)]


            def get_init_inputs():
                return []
            """
        )
    )
    role = reference.ReferenceRole()
    before = torch.cuda.memory_allocated()
    loaded = role.cmd_load_problem({"device": "cuda", "problem": str(problem), "place": "host"})
    try:
        assert loaded["placed"] == "host"
        assert role.model.fc.weight.device.type == "cpu"
        assert all(t.device.type == "cpu" for t in role.initial_state.values())
        assert torch.cuda.memory_allocated() - before < 64 << 20
        role.cmd_set_plan({"cache_bytes": 0})  # never touches the model: before_command knows
        role.before_command("prepare_case")
        assert role.model.fc.weight.device.type == "cuda"
        assert all(t.device.type == "cuda" for t in role.initial_state.values())
        assert torch.cuda.memory_allocated() - before >= 2 * (256 << 20)
        role.cmd_prepare_case(CASE)
        assert role.cases["native-0"].figures["truth"] == "float64"
    finally:
        _close(role)


# -- out of the device's memory with the device to itself: what the reference lets go, and says --

LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""


def _linear_role(tmp_path) -> reference.ReferenceRole:
    problem = tmp_path / "linear.py"
    problem.write_text(textwrap.dedent(LINEAR))
    role = reference.ReferenceRole()
    role.cmd_load_problem({"device": "cpu", "problem": str(problem)})
    role.cmd_set_plan({"cache_bytes": 1 << 30})
    return role


def _out_of_memory() -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")


def test_out_of_memory_twice_lets_the_float64_model_go_and_the_next_truth_makes_it_again(
    tmp_path,
):
    """A draw that still runs out with every case let go is tried once more without the float64
    model (2_ShallowWideMLP on an 80 GB H100: 17 GB of it beside the model, its initial state and
    their shared block). The next float64 run makes the model again: the truth stays float64."""
    role = _linear_role(tmp_path)
    try:
        role.cmd_prepare_case(CASE)
        assert role.model64 is not None and role.cases
        seen = []

        def needs_room():
            seen.append((len(role.cases), role.model64 is not None))
            if len(seen) < 3:
                raise _out_of_memory()
            return "made"

        assert role._with_room(needs_room) == "made"
        # Tried with everything; then with the unpinned cases let go; then without the model too.
        assert seen == [(1, True), (0, True), (0, False)]
        role.cmd_prepare_case({**CASE, "id": "h1_native-0", "family": "h1_native"})
        assert role.model64 is not None
        assert role.cases["h1_native-0"].figures["truth"] == "float64"
    finally:
        _close(role)


def test_out_of_memory_three_times_moves_the_model_out_and_back_then_tries_last(
    tmp_path, monkeypatch
):
    """The third step of room: the model and its initial state leave the device and come back,
    so that torch's cache can return segments they shared with freed ranges (2_ShallowWideMLP on
    an 80 GB H100, session 24: 40 GiB free in the cache, 24 GiB of tensors, a case's 8 GiB block
    refused). Taken only after the cases and the float64 model went; a fault's account counts
    it."""
    role = _linear_role(tmp_path)
    try:
        role.cmd_prepare_case(CASE)
        steps = []
        compact = role._compact
        monkeypatch.setattr(role, "_compact", lambda: (steps.append("compact"), compact()))

        def needs_room():
            steps.append((len(role.cases), role.model64 is not None))
            if len(steps) < 5:
                raise _out_of_memory()
            return "made"

        assert role._with_room(needs_room) == "made"
        assert steps == [(1, True), (0, True), (0, False), "compact", (0, False)]
        assert "moved out and back 0 times" in role.holding_words()  # on the host: nothing moved
    finally:
        _close(role)


@pytest.mark.skipif(not GPU, reason="segments are the device's")
def test_moving_the_model_out_and_back_keeps_its_values_and_gives_back_the_cache(tmp_path):
    """On the device: after _compact (with a freed range beside a live tensor in torch's cache)
    the model and its initial state are on the device again with the same values."""
    problem = tmp_path / "linear.py"
    problem.write_text(textwrap.dedent(LINEAR))
    role = reference.ReferenceRole()
    role.cmd_load_problem({"device": "cuda", "problem": str(problem)})
    role.cmd_set_plan({"cache_bytes": 1 << 30})
    try:
        before = {k: v.clone() for k, v in role.initial_state.items()}
        weights = {k: v.detach().clone() for k, v in role.model.state_dict().items()}
        # A freed range beside a live tensor in one segment: a large block split in two.
        big = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        del big
        pinned = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")  # placed in its segment
        role._compact()
        assert role.compactions == 1
        assert all(v.is_cuda for v in role.initial_state.values())
        assert all(torch.equal(role.initial_state[k], before[k]) for k in before)
        assert all(torch.equal(v, weights[k]) for k, v in role.model.state_dict().items())
        del pinned
    finally:
        _close(role)


def test_what_fits_at_once_keeps_the_float64_model_and_other_failures_are_not_retried(tmp_path):
    role = _linear_role(tmp_path)
    try:
        role.cmd_prepare_case(CASE)
        model64 = role.model64
        assert role._with_room(lambda: "made") == "made"
        assert role.model64 is model64 and role.cases  # nothing let go for a first try that fits

        def broken():
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

        with pytest.raises(RuntimeError, match="shapes"):
            role._with_room(broken)
        assert role.model64 is model64 and role.cases

        def never_fits():
            raise _out_of_memory()

        with pytest.raises(torch.OutOfMemoryError):
            role._with_room(never_fits)  # the fourth failure is the harness's out of memory
    finally:
        _close(role)


def test_the_reference_says_what_it_held_when_it_ran_out(tmp_path):
    """An out-of-memory answer from the reference carries its account (cases, pins, blocks, the
    models), which the harness fault's detail keeps: whose memory it was is then on record. Not
    for another failure, and not from a role that has no account (the candidate's)."""
    from kbv import worker

    role = _linear_role(tmp_path)
    try:
        role.cmd_prepare_case(CASE)
        role.cases["native-0"].pins = 1
        held = role.holding()
        assert held["cases"] == 1 and held["pinned"] == 1 and held["case_bytes"] > 0
        assert held["model_bytes"] == (64 * 32 + 32) * 4
        assert held["model64_bytes"] == 2 * held["model_bytes"]
        words = role.holding_words()
        assert "1 cases (1 pinned)" in words and "the float64 model" in words, words
        payload = worker._with_resource({"kind": "internal_error"}, _out_of_memory(), role)
        assert payload["resource"] == "out_of_memory" and payload["memory"] == "device"
        assert payload["holding"] == words
        other = worker._with_resource({}, RuntimeError("shapes cannot be multiplied"), role)
        assert "holding" not in other
        assert "holding" not in worker._with_resource({}, _out_of_memory(), object())
    finally:
        role.cases["native-0"].pins = 0
        _close(role)


@pytest.mark.skipif(not GPU, reason="torch's segments are the device's")
@pytest.mark.parametrize(
    ("conf", "kind"), [("expandable_segments:True", "expandable"), ("", "fixed")]
)
def test_the_reference_names_the_segments_its_cache_holds(conf, kind):
    """A fault's account says which kind of segments torch's cache held: fixed ones (torch's
    default, the reference's and the candidate's) keep a freed range that shares a segment with
    a live tensor (the reason for _compact); expandable ones, where a user set them, do not. The
    setting is read at torch's first allocation, hence a process of its own for each."""
    from conftest import run_python

    code = (
        "import torch; from kbv import reference; "
        "x = torch.empty(1 << 22, device='cuda'); "
        "print(reference._segment_kind(torch.device('cuda')))"
    )
    done = run_python(code, timeout=120, PYTORCH_CUDA_ALLOC_CONF=conf)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == kind


def test_letting_go_keeps_only_the_cases_in_use_and_a_case_drawn_again_is_the_same_draw(tmp_path):
    """An evaluation that gives its device memory back to wait for more (a growth refused where
    waiting could wait forever: src/eval/memory_ledger.hpp) first lets go of its cases (set_plan
    with let_go). A budget of 0 alone keeps the last case prepared; let_go keeps only the
    pinned ones. The case drawn again is the same draw: the session's secret."""
    role = _role(tmp_path, "cpu")
    other = dict(CASE, id="native-1", draw=1)
    try:
        role.cmd_set_plan({"cache_bytes": 1 << 30})
        in_use = role.cmd_prepare_case(dict(CASE, pin=True))
        first = role.cmd_prepare_case(other)
        sums = dict(role.cases["native-1"].checksums)
        role.cmd_set_plan({"cache_bytes": 0})
        assert set(role.cases) == {"native-0", "native-1"}  # the last prepared stays
        answer = role.cmd_set_plan({"cache_bytes": 1 << 30, "let_go": True})
        assert set(role.cases) == {"native-0"}  # pinned: in use
        assert answer["resident_bytes"] == in_use["store"]["resident_bytes"]
        again = role.cmd_prepare_case(other)
        assert not again["cached"] and first["cached"] is False
        assert dict(role.cases["native-1"].checksums) == sums
    finally:
        role.cmd_unpin({"ids": ["native-0"]})
        _close(role)
