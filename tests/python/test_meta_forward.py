"""The forward's sizes before any case is drawn (kbv.reference `_meta_forward`): the reference
runs its forward once on the meta device at load, where nothing is allocated, and answers the
outputs' bytes and the forward's live peak in `sizes`; the memory ledger's reservation before the
first draw follows from them (src/eval/memory_plan.hpp). Sizes here are exact: the meta device
knows shapes, and the counter follows each tensor from its operator to its release."""

from __future__ import annotations

import random

import torch  # before kbv_native: the module must share torch's CUDA runtime
from conftest import import_native_or_skip_module

kn = import_native_or_skip_module()

from kbv import reference  # noqa: E402

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w):
        FORWARD


def get_inputs():
    return [torch.randn(32, 16), torch.randn(16, 1024)]


def get_init_inputs():
    return []
"""

PRODUCT = 32 * 1024 * 4  # a float32 (32, 1024)


def sizes_of(reference_roles, forward: str) -> dict:
    role = reference_roles(PROBLEM.replace("FORWARD", forward))
    loaded = role.cmd_load_problem({"device": "cpu", "problem": role.module.__file__})
    return loaded["sizes"]


def test_a_product_far_larger_than_its_inputs_is_known_before_drawing(reference_roles):
    # KernelBench's 7_Matmul_with_small_K_dimension_ in small: 66 KB of inputs, a 131 KB product.
    sizes = sizes_of(reference_roles, "return x @ w")
    assert sizes["forward_estimate"] == "meta"
    assert sizes["input_bytes"] == (32 * 16 + 16 * 1024) * 4
    assert sizes["output_bytes"] == PRODUCT
    assert sizes["forward_peak_bytes"] == PRODUCT


def test_intermediates_above_the_output_count_in_the_peak(reference_roles):
    # A reduction after a large product (a level-2 chain): the output is 128 bytes.
    sizes = sizes_of(reference_roles, "return (x @ w).relu().sum(dim=1)")
    assert sizes["output_bytes"] == 32 * 4
    # The product and its relu are alive together; the product is released before the sum.
    assert sizes["forward_peak_bytes"] == 2 * PRODUCT


def test_views_add_nothing_and_released_tensors_leave_the_count(reference_roles):
    # Three products in turn, each name rebound: at most two alive at once; the transposes,
    # the in-place add and the final view allocate nothing.
    forward = (
        "y = (x @ w).t()\n        y = y * 2\n        y = y.t() * 3\n        y.add_(1)\n"
        "        return y.view(-1)"
    )
    sizes = sizes_of(reference_roles, forward)
    assert sizes["output_bytes"] == PRODUCT
    assert sizes["forward_peak_bytes"] == 2 * PRODUCT


def test_a_forward_the_meta_device_cannot_run_leaves_the_estimate_from_the_inputs(
    reference_roles,
):
    sizes = sizes_of(reference_roles, "return x * float(w.sum().item())")
    assert sizes["forward_estimate"].startswith("unavailable:"), sizes
    assert "forward_peak_bytes" not in sizes and "output_bytes" not in sizes


def test_a_forward_past_its_budget_is_stopped(reference_roles, monkeypatch):
    # Counted in operators, not seconds: the same answer on a loaded machine.
    forward = "y = x @ w\n        for _ in range(5):\n            y = y * 2\n        return y"
    monkeypatch.setattr(reference, "META_FORWARD_MAX_OPS", 5)
    sizes = sizes_of(reference_roles, forward)
    expected = "unavailable: TimeoutError: the meta forward dispatched over 5 operators"
    assert sizes["forward_estimate"] == expected, sizes
    monkeypatch.setattr(reference, "META_FORWARD_MAX_OPS", 6)
    assert sizes_of(reference_roles, forward)["forward_estimate"] == "meta"


def test_pieces_and_reshapes_of_a_tensor_are_not_new_memory(reference_roles):
    # chunk's pieces come back as a list (one aliasing return), a 3-D matmul's result through
    # _unsafe_view: both share the storage counted once.
    forward = (
        "a, b = (x @ w).chunk(2, dim=1)\n        y = (a.unsqueeze(0) @ b.t().unsqueeze(0))\n"
        "        return y.reshape(32, 32)"
    )
    sizes = sizes_of(reference_roles, forward)
    assert sizes["output_bytes"] == 32 * 32 * 4
    assert sizes["forward_peak_bytes"] == PRODUCT + 32 * 32 * 4


def test_tensors_a_forward_makes_without_a_device_are_made_on_meta(reference_roles):
    # A 1 GiB buffer made inside the forward, as a problem's own scratch: counted, never held.
    sizes = sizes_of(reference_roles, "big = torch.zeros(1 << 28)\n        return x @ w + big[0]")
    assert sizes["forward_estimate"] == "meta", sizes
    assert sizes["forward_peak_bytes"] >= (1 << 30) + PRODUCT


def test_the_meta_forward_leaves_the_global_generator_as_it_was(reference_roles, monkeypatch):
    """The model built on the meta device draws nothing from the generators the problem's own
    construction and forward use: the real model's first forward is the same either way."""
    # Draws on the CPU by name (the meta device's own draws draw nothing), and from Python's.
    source = PROBLEM.replace(
        "FORWARD",
        "import random\n        random.random()\n"
        "        return x @ w + torch.rand(1, device='cpu')",
    )
    outputs = []
    for meta in (True, False):
        if not meta:
            monkeypatch.setattr(reference.ReferenceRole, "_meta_forward", lambda self, template: {})
        role = reference_roles(source)
        torch.manual_seed(7)
        random.seed(7)
        role.cmd_load_problem({"device": "cpu", "problem": role.module.__file__})
        outputs.append((torch.rand(3), random.random()))
    torch.testing.assert_close(outputs[0][0], outputs[1][0], rtol=0, atol=0)
    assert outputs[0][1] == outputs[1][1]


def test_a_reference_worker_warms_the_meta_device_up_while_it_waits():
    """The first meta operator's imports (torch._dynamo among some 900 modules) are made on a
    thread when a reference worker starts, before its first load needs them; the warm-up moves
    no generator. A process of its own: this one has run meta operators already."""
    from conftest import run_python

    code = (
        "import sys, torch; from kbv import reference; "
        "before = 'torch._dynamo' in sys.modules; state = torch.get_rng_state(); "
        "reference.warm_meta_dispatch_in_background().join(); "
        "print(before, 'torch._dynamo' in sys.modules, torch.equal(state, torch.get_rng_state()))"
    )
    done = run_python(code, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True", "True"]
