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


def test_kernel_signature_names_the_kernels_not_their_order():
    # 57_conv_transposed_2D's copy (session 33): its TF32 tensor-core dgrad between two layout
    # transposes; the baseline's plan there launched other kernels.
    copy = ["nchwToNhwcKernel", "sm90_xmma_dgrad_implicit_gemm_tf32", "nhwcToNchwKernel"]
    same = kernel_audit.kernel_signature(copy)
    assert same == kernel_audit.kernel_signature(list(reversed(copy)))  # streams interleave
    assert same["distinct"] == 3
    assert len(same["sha256"]) == 16
    other = kernel_audit.kernel_signature(["implicit_convolve_sgemm"] * 3676)
    assert other["sha256"] != same["sha256"]
    assert other["distinct"] == 1 and other["top"] == ["implicit_convolve_sgemm"]
    # How often each kernel ran counts: one launch more is another plan's work.
    assert kernel_audit.kernel_signature([*copy, copy[1]])["sha256"] != same["sha256"]
    assert kernel_audit.kernel_signature(["k" * 400])["top"] == ["k" * 160]
