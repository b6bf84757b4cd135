"""The CUPTI kernel audit (python/kbv/kernel_audit.py) on a machine without a GPU: it answers
"unavailable", never an error (the figures themselves are checked on the GPU, bench/)."""

from __future__ import annotations

import torch
from conftest import import_native_or_skip_module  # noqa: E402

import_native_or_skip_module()

from kbv import kernel_audit  # noqa: E402

CPU = torch.device("cpu")


def test_kernel_audit_on_the_cpu_is_unavailable_not_an_error():
    out = kernel_audit.kernel_audit(lambda i: None, CPU, 3)
    assert out == {"available": False, "why": "not a CUDA device"}
