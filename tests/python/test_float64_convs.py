"""float64_convs: float64 transposed convolutions routed around cuDNN (on the GPU), on the CPU.

The mode is made for the CPU here (`device_type="cpu"`) and a mode beneath it records the state
cuDNN was in when each call reached it: the routing itself, not its speed, is what the CPU can
show (the speed is docs/results/h100-2026-12-07-s33/)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from kbv import float64_convs
from torch import nn
from torch.overrides import TorchFunctionMode


class Seen(TorchFunctionMode):
    """Records (function, cuDNN enabled) for every call that reaches it; `fail_first_routed`:
    the first transposed convolution made with cuDNN off runs out of device memory."""

    def __init__(self, fail_first_routed: bool = False) -> None:
        super().__init__()
        self.calls: list[tuple[object, bool]] = []
        self.fail_first_routed = fail_first_routed

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append((func, torch.backends.cudnn.enabled))
        if self.fail_first_routed and not torch.backends.cudnn.enabled:
            self.fail_first_routed = False
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
        return func(*args, **(kwargs or {}))


class UpThenConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(3, 4, kernel_size=3, stride=2)
        self.conv = nn.Conv2d(4, 2, kernel_size=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.up(x))


def _run(model: nn.Module, x: torch.Tensor, seen: Seen):
    mode = float64_convs.NativeTransposedConvs("cpu")
    with seen, mode:
        out = model(x)
    return out, mode


def _states(seen: Seen, func) -> list[bool]:
    return [enabled for f, enabled in seen.calls if f is func]


def test_a_float64_transposed_convolution_runs_with_cudnn_off_and_nothing_else_does():
    torch.manual_seed(0)
    model = UpThenConv().double()
    x = torch.randn(2, 3, 9, 9, dtype=torch.float64)
    expected = model(x)
    assert torch.backends.cudnn.enabled
    seen = Seen()
    out, mode = _run(model, x, seen)
    assert torch.equal(out, expected)
    assert _states(seen, torch.conv_transpose2d) == [False]
    assert _states(seen, torch.conv2d) == [True]  # ordinary convolutions as they were
    assert (mode.routed, mode.fell_back) == (1, 0)
    assert torch.backends.cudnn.enabled  # put back


def test_float32_and_other_devices_are_left_alone():
    torch.manual_seed(0)
    model = UpThenConv()
    seen = Seen()
    _, mode = _run(model, torch.randn(2, 3, 9, 9), seen)
    assert _states(seen, torch.conv_transpose2d) == [True]
    assert mode.routed == 0
    seen = Seen()
    with seen, float64_convs.NativeTransposedConvs("cuda"):
        model.double()(torch.randn(2, 3, 9, 9, dtype=torch.float64))
    assert _states(seen, torch.conv_transpose2d) == [True]


def test_out_of_memory_with_cudnn_off_runs_the_call_again_through_cudnn():
    torch.manual_seed(0)
    weight = torch.randn(3, 4, 3, 3, 3, dtype=torch.float64)
    x = torch.randn(1, 3, 5, 5, 5, dtype=torch.float64)
    expected = F.conv_transpose3d(x, weight, stride=2)
    seen = Seen(fail_first_routed=True)
    mode = float64_convs.NativeTransposedConvs("cpu")
    with seen, mode:
        out = F.conv_transpose3d(x, weight, stride=2)
    assert torch.equal(out, expected)
    assert _states(seen, torch.conv_transpose3d) == [False, True]
    assert (mode.routed, mode.fell_back) == (0, 1)
    assert torch.backends.cudnn.enabled


def test_only_models_holding_a_transposed_convolution_are_routed():
    assert float64_convs.has_transposed_convs(UpThenConv())
    assert not float64_convs.has_transposed_convs(nn.Sequential(nn.Conv2d(3, 3, 3), nn.ReLU()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_gpu_the_routed_float64_transposed_convolution_gives_cudnns_values():
    """On the GPU: routed (cuDNN off) and through cuDNN, the same float64 values to rounding."""
    torch.manual_seed(0)
    model = nn.ConvTranspose3d(8, 4, kernel_size=(3, 5, 7), stride=2).cuda().double()
    x = torch.randn(2, 8, 12, 10, 9, device="cuda", dtype=torch.float64)
    with torch.no_grad():
        through_cudnn = model(x)
        mode = float64_convs.NativeTransposedConvs("cuda")
        with mode:
            routed = model(x)
    assert (mode.routed, mode.fell_back) == (1, 0)
    scale = float(through_cudnn.abs().max())
    assert float((routed - through_cudnn).abs().max()) <= 1e-12 * scale
