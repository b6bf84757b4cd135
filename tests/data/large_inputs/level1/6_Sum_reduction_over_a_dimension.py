"""A problem with inputs larger than its work root's disk, for the CPU test of the case path
(issue 18, tests/python/test_large_inputs.py): 2 GiB of float32 input a case (512 x 1024 x
1024, 2^31 bytes), reduced over the middle dimension. Its cases must stream through shared
memory without touching the disk: the test runs it with TMPDIR on a 1 GiB tmpfs. (KernelBench's
own sizes, to 17 GB a case, ran on the H200: docs/results/issue18-audit-speed-h200.md; indices
past 2^31 elements are test_native_arena's.)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.rand(512, 1024, 1024)]


def get_init_inputs():
    return [1]
