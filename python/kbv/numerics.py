"""Global numerics settings: the TF32 baseline, the plain-FP32 baseline, and snapshots of every
flag a candidate could flip to slow the baseline or speed itself up (threat E3)."""

from __future__ import annotations

from typing import Any

import torch


def set_tf32(enabled: bool) -> None:
    """Sets TF32 for float32 matmul and convolutions with both the legacy and the new API.

    The legacy flags are written first: PyTorch 2.9+ refuses to read them once the new
    `fp32_precision` API has been used, but accepts the new API after the legacy one.
    """
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    precision = "tf32" if enabled else "ieee"
    torch.backends.cuda.matmul.fp32_precision = precision
    torch.backends.cudnn.conv.fp32_precision = precision


def _read(getter) -> Any:
    try:
        return getter()
    except Exception as error:  # the legacy getters raise once the new API was used
        return f"unreadable: {type(error).__name__}"


def snapshot() -> dict[str, Any]:
    """Every global numerics flag that changes results or speed, as plain values."""
    return {
        "matmul_fp32_precision": _read(lambda: torch.backends.cuda.matmul.fp32_precision),
        "cudnn_conv_fp32_precision": _read(lambda: torch.backends.cudnn.conv.fp32_precision),
        "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
        "cudnn_enabled": torch.backends.cudnn.enabled,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "matmul_allow_fp16_reduced_precision": _read(
            lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "matmul_allow_bf16_reduced_precision": _read(
            lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "num_threads": torch.get_num_threads(),
        "default_dtype": str(torch.get_default_dtype()),
        "grad_enabled": torch.is_grad_enabled(),
    }


def changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    return {k: [before[k], after.get(k)] for k in before if before[k] != after.get(k)}


def restore(state: dict[str, Any]) -> None:
    """Puts back the flags of a snapshot taken by `snapshot()` (after a candidate changed them)."""
    set_tf32(state["matmul_fp32_precision"] == "tf32")
    torch.backends.cudnn.conv.fp32_precision = state["cudnn_conv_fp32_precision"]
    torch.backends.cudnn.enabled = state["cudnn_enabled"]
    torch.backends.cudnn.benchmark = state["cudnn_benchmark"]
    torch.backends.cudnn.deterministic = state["cudnn_deterministic"]
    torch.set_num_threads(state["num_threads"])
