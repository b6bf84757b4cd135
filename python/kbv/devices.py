"""The two device helpers that timing, the kernel audit, memory, the GPU guards and the roles
share: a wait for the device's work, and the CUDA device index a torch.device names. Kept apart
so none of those modules imports another only for these."""

from __future__ import annotations

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()
