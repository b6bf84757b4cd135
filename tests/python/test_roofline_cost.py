"""The reference's FLOP count for the roofline floor (python/kbv/roofline.py), and its warm-up
thread: the count of the main thread is exact whether or not the warm-up runs beside it."""

import torch
from kbv import roofline


class TwoMatmuls(torch.nn.Module):
    def forward(self, a, b):
        return (a @ b) @ b


def test_flops_are_counted_exactly_beside_the_warm_up_thread():
    a, b = torch.randn(32, 64), torch.randn(64, 64)
    expected = 2 * (2 * 32 * 64 * 64)
    thread = roofline.warm_up_in_background()
    # While the thread may still be counting its own matmul: it has a dispatch-mode stack of its
    # own, so neither count leaks into the other.
    for _ in range(3):
        cost = roofline.reference_cost(TwoMatmuls(), [a, b], torch.device("cpu"))
        assert cost["flops"] == expected
    thread.join(timeout=120)
    assert not thread.is_alive()
    cost = roofline.reference_cost(TwoMatmuls(), [a, b], torch.device("cpu"))
    assert cost["flops"] == expected
    assert cost["input_bytes"] == (32 * 64 + 64 * 64) * 4
    assert cost["output_bytes"] == 32 * 64 * 4
