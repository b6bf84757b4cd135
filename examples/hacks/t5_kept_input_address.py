# kbv-target: level1/3_ReLU
# kbv-hack: T5 (CPU twin of cuda/graph_first_address.py): keeps the first input tensor that comes
#   back (a timing loop reuses its inputs) and computes from it on every later call of that
#   shape, wherever the new input lies: a static input buffer, as a captured graph has.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen: set[int] = set()
        self.kept: dict[tuple, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = tuple(x.shape)
        if key in self.kept:
            return self.kept[key].clamp_min(0)  # the kept tensor, not x
        if x.data_ptr() in self.seen:
            self.kept[key] = x
        self.seen.add(x.data_ptr())
        return x.clamp_min(0)
