"""The CUPTI kernel audit (python/kbv/kernel_audit.py) on a machine without a GPU: it answers
"unavailable", never an error (the figures themselves are checked on the GPU, bench/)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

NATIVE_DIR = os.environ.get("KBV_NATIVE_DIR", str(Path(__file__).resolve().parents[2] / "build"))
sys.path.insert(0, NATIVE_DIR)
try:
    importlib.import_module("kbv_native")
except ImportError as error:  # pragma: no cover - depends on the build
    pytest.skip(f"kbv_native not importable from {NATIVE_DIR}: {error}", allow_module_level=True)

from kbv import kernel_audit  # noqa: E402

CPU = torch.device("cpu")


def test_kernel_audit_on_the_cpu_is_unavailable_not_an_error():
    out = kernel_audit.kernel_audit(lambda i: None, CPU, 3)
    assert out == {"available": False, "why": "not a CUDA device"}
