"""The input families and parameter re-draws of the worker: domains, laws, determinism."""

from __future__ import annotations

import pytest
import torch
from kbv import families, params


def gen(device: str = "cpu", seed: int = 1) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def template():
    torch.manual_seed(0)
    return [torch.rand(64, 32), torch.randint(0, 10, (64,)), 3]


def test_native_draw_is_the_problems_own_generator_under_a_seed():
    def get_inputs():
        return [torch.rand(4, 4)]

    a = families.native_inputs(get_inputs, 5)[0]
    b = families.native_inputs(get_inputs, 5)[0]
    c = families.native_inputs(get_inputs, 6)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_secret_seeds_differ_by_secret_and_label():
    assert families.derive_seed("a", "x", 0) == families.derive_seed("a", "x", 0)
    assert families.derive_seed("a", "x", 0) != families.derive_seed("b", "x", 0)
    assert families.derive_seed("a", "x", 0) != families.derive_seed("a", "x", 1)


def test_integer_and_scalar_inputs_are_kept():
    t = template()
    for family in ("h2_mixed_sign", "h3_wide_range", "h4_special"):
        out = families.hidden_inputs(family, 0, t, gen(), set())
        assert torch.equal(out[1], t[1]) and out[1].dtype == torch.int64
        assert out[2] == 3
        assert out[0].dtype == torch.float32 and out[0].shape == t[0].shape


def test_mixed_sign_has_both_signs_and_a_nonzero_mean():
    t = template()
    for draw in range(3):
        x = families.hidden_inputs("h2_mixed_sign", draw, t, gen(seed=draw), set())[0]
        assert (x > 0).any() and (x < 0).any()
        assert abs(float(x.mean())) > 0.05 * float(x.std())


def test_large_offset_draw_still_has_both_signs():
    x = families.hidden_inputs("h2_mixed_sign", 2, template(), gen(), set())[0]
    assert float(x.mean()) > 3 * float(x.std()) / 2
    assert (x < 0).any()


def test_wide_range_spans_orders_of_magnitude_both_ways():
    x = families.hidden_inputs("h3_wide_range", 1, template(), gen(), set())[0].abs()
    assert float(x.max()) / float(x.median()) > 1e3
    assert float(x.median()) / float(x.min()) > 1e3


def test_special_values_have_zero_rows_ties_and_zeros():
    t = template()
    mixed = families.hidden_inputs("h4_special", 0, t, gen(), set())[0]
    assert (mixed == 0).all(dim=1).any()  # whole zero rows
    ties = families.hidden_inputs("h4_special", 1, t, gen(), set())[0]
    assert ties.unique().numel() <= 7  # a handful of levels: ties everywhere
    zeros = families.hidden_inputs("h4_special", 2, t, gen(), set())[0]
    assert (zeros == 0).all()


def test_nonnegative_support_is_kept_when_asked():
    t = template()
    for family in ("h2_mixed_sign", "h3_wide_range", "h4_special"):
        x = families.hidden_inputs(family, 1, t, gen(), {0})[0]
        assert (x >= 0).all()


def test_paper_transforms_scale_float_inputs_only():
    t = template()
    out = families.paper_inputs("paper_neg1", t)
    assert torch.equal(out[0], -t[0]) and torch.equal(out[1], t[1])


def test_redraw_breaks_ones_and_zeros_but_keeps_positive_support():
    g = gen()
    ones = params.redraw(torch.ones(100), g)
    zeros = params.redraw(torch.zeros(100), g)
    assert not torch.allclose(ones, torch.ones(100)) and (ones > 0).all()
    assert zeros.abs().max() > 0 and (zeros < 0).any()
    weights = torch.randn(1000) * 0.1
    fresh = params.redraw(weights, g)
    assert not torch.equal(fresh, weights)
    assert abs(float(fresh.std()) - 0.1) < 0.02


def test_redrawn_state_only_touches_named_float_tensors():
    module = torch.nn.BatchNorm1d(4)
    initial = params.state_tensors(module)
    state = params.redrawn_state(initial, {"weight", "running_var"}, gen())
    assert not torch.equal(state["weight"], module.weight)
    assert torch.equal(state["bias"], module.bias)
    assert torch.equal(state["num_batches_tracked"], module.num_batches_tracked)
    assert (state["running_var"] > 0).all()


def test_a_redraw_follows_the_initial_state_not_a_previous_redraw():
    # A case drawn again must be the same case: a redraw from what a previous draw left in the
    # model (a ones-initialised scale turned into spread values) would follow another law.
    module = torch.nn.BatchNorm1d(64)
    initial = {k: v.detach().clone() for k, v in params.state_tensors(module).items()}
    first = params.redrawn_state(initial, {"weight"}, gen())
    params.load_into(module, first, {k: k for k in first})  # the model now holds a redraw
    again = params.redrawn_state(initial, {"weight"}, gen())
    assert torch.equal(first["weight"], again["weight"])
    from_the_redraw = params.redrawn_state(params.state_tensors(module), {"weight"}, gen())
    assert not torch.equal(from_the_redraw["weight"], first["weight"])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_state_redrawn_at_once_equals_its_tensors_redrawn_one_by_one(device):
    """redrawn_state reads every tensor's moments in one transfer (one wait rather than four a
    tensor); the state it gives is the one the tensors redrawn one by one would give, bit for
    bit: spread weights, ones, zeros, a negative constant, one element, none, half precision."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16)).to(device)
    initial = {k: v.detach().clone() for k, v in params.state_tensors(module).items()}
    initial["negative"] = -torch.ones(5, device=device)
    initial["single"] = torch.tensor([3.0], device=device)
    initial["empty"] = torch.zeros(0, device=device)
    initial["half"] = torch.ones(7, dtype=torch.float16, device=device)
    names = set(initial) - {"0.bias"}
    at_once = params.redrawn_state(initial, names, gen(device))
    one_by_one_gen = gen(device)
    for name, tensor in initial.items():
        if name in names and tensor.is_floating_point():
            alone = params.redraw(tensor, one_by_one_gen)
        else:
            alone = tensor
        assert at_once[name].dtype == tensor.dtype and torch.equal(at_once[name], alone), name
