"""The float64 truth of problems a plain float64 copy of the model cannot run (on the CPU,
through the reference worker's own commands): a model whose code captured one of its submodules
in a lambda (KernelBench's level3/44_MiniGPTBlock: a deep copy keeps calling the float32
submodule) is built anew for float64; float tensors kept as plain attributes become float64
with the rest. A problem that truly does not run in float64 keeps the recorded float32 fallback,
now with its reason; a library's out-of-memory words are a shortage (cases let go, tried again),
not a problem without float64."""

from __future__ import annotations

import copy

import torch  # before kbv_native: the module must share torch's CUDA runtime
from conftest import import_native_or_skip_module

kn = import_native_or_skip_module()

from kbv import reference  # noqa: E402

SECRET = "float64-truth-test-secret"

# minGPT's block keeps `self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))` over its ModuleDict.
CLOSURE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(64, 128), c_proj=nn.Linear(128, 32)))
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(torch.tanh(m.c_fc(x)))

    def forward(self, x):
        return self.mlpf(x)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""

# A constant kept as a plain attribute: `.to(torch.float64)` leaves it float32.
PLAIN_ATTRIBUTE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.randn(64, 32)

    def forward(self, x):
        return x @ self.w


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""

# KernelBench's level3/35_LSTM draws its initial hidden state inside the forward, with
# torch.randn and no dtype: float32 in a float64 run, which nn.LSTM refuses beside float64
# weights (here zeros, so the truth can be computed by hand; the factory is what matters).
STATE_MADE_IN_FORWARD = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), 16, device=x.device)
        c0 = torch.zeros(1, x.size(0), 16, device=x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :]) * torch.full((1,), 0.5, device=x.device)


def get_inputs():
    return [torch.randn(4, 6, 8)]


def get_init_inputs():
    return []
"""

NO_FLOAT64 = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float64:
            raise RuntimeError("this operator has no double kernel")
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""


def _native_case(role) -> reference.Case:
    role.cmd_prepare_case(
        {"id": "native-0", "family": "native", "draw": 0, "redraw": [], "secret": SECRET}
    )
    return role.cases["native-0"]


def test_a_model_whose_code_captured_a_submodule_is_built_anew_for_float64(reference_roles):
    role = reference_roles(CLOSURE)
    case = _native_case(role)
    assert case.figures["truth"] == "float64", case.figures["truth_note"]
    assert role._model64_kind == "constructed"
    (x,) = case.inputs.as_list()
    m = role.model.mlp
    x64 = x.double()
    expected = torch.nn.functional.linear(
        torch.tanh(torch.nn.functional.linear(x64, m.c_fc.weight.double(), m.c_fc.bias.double())),
        m.c_proj.weight.double(),
        m.c_proj.bias.double(),
    )
    assert case.judged[0].dtype == torch.float64
    torch.testing.assert_close(case.judged[0], expected, rtol=1e-12, atol=1e-12)
    # The float32 model's own capture is untouched: it still runs its own submodule.
    assert role.model.mlpf(x).dtype == torch.float32


def test_a_model_whose_copy_runs_keeps_the_copy(reference_roles):
    role = reference_roles(PLAIN_ATTRIBUTE)
    case = _native_case(role)
    assert case.figures["truth"] == "float64", case.figures["truth_note"]
    assert role._model64_kind == "copy"
    assert role.model64.w.dtype == torch.float64 and role.model.w.dtype == torch.float32
    (x,) = case.inputs.as_list()
    torch.testing.assert_close(case.judged[0], x.double() @ role.model.w.double())


def test_tensors_made_inside_the_forward_are_float64_in_the_float64_run(reference_roles):
    role = reference_roles(STATE_MADE_IN_FORWARD)
    case = _native_case(role)
    assert case.figures["truth"] == "float64", case.figures["truth_note"]
    assert case.judged[0].dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32  # the problem's own default, put back
    assert role.model.lstm.weight_ih_l0.dtype == torch.float32  # the float32 model as it was
    (x,) = case.inputs.as_list()
    model64 = copy.deepcopy(role.model).double()
    zeros = torch.zeros(1, x.size(0), 16, dtype=torch.float64)
    with torch.no_grad():
        out, _ = model64.lstm(x.double(), (zeros, zeros))
        expected = model64.fc(out[:, -1, :]) * 0.5
    torch.testing.assert_close(case.judged[0], expected, rtol=1e-12, atol=1e-12)


def test_a_problem_without_float64_keeps_the_float32_fallback_with_its_reason(reference_roles):
    role = reference_roles(NO_FLOAT64)
    case = _native_case(role)
    assert case.figures["truth"] == "float32"
    note = case.figures["truth_note"]
    assert "does not run in float64" in note and "no double kernel" in note, note
    assert torch.get_default_dtype() == torch.float32  # put back after the float64 run failed


def test_a_library_out_of_memory_is_a_shortage_not_a_missing_float64(reference_roles, monkeypatch):
    role = reference_roles(PLAIN_ATTRIBUTE)
    evicted = []
    monkeypatch.setattr(role, "_evict", lambda incoming, everything=False: evicted.append(1))

    def short_of_memory(inputs, fp32):
        raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate")

    monkeypatch.setattr(role, "_float64_run", short_of_memory)
    truth, kind, note = role._truth([torch.randn(16, 64)], [torch.zeros(16, 32)])
    assert kind == "float32"
    assert evicted == [1]  # the kept cases were let go and the run tried once more
    assert note.startswith("the float64 run did not fit in device memory"), note
