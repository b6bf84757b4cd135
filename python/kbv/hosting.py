"""What both worker roles share: the device, the seeded construction of a module, forward calls
with their structural checks, and the environment report."""

from __future__ import annotations

import contextlib
import platform
import sys
import time
from typing import Any

import torch

from . import devices, memory, numerics
from .loading import WorkerError, trim

CONSTRUCT_SEED = 42  # KernelBench seeds both Model and ModelNew construction alike


def device_of(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise WorkerError("usage_error", f"--device {name}: no CUDA device is available")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    return device


def seeded(seed: int):
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def as_outputs(result: Any) -> tuple[list[Any], str]:
    """The forward's result as a list, and its structure ('tensor' or 'sequence')."""
    if isinstance(result, (tuple, list)):
        return list(result), "sequence"
    return [result], "tensor"


def describe(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {
            "type": type(value).__module__ + "." + type(value).__qualname__,
            "plain": type(value) is torch.Tensor,
            "dtype": str(value.dtype).removeprefix("torch."),
            "shape": list(value.shape),
            "device": str(value.device),
        }
    return {"type": type(value).__module__ + "." + type(value).__qualname__, "plain": False}


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
    except Exception:  # tensors without storage (subclasses, meta) cannot alias
        return False


def forward(model: torch.nn.Module, inputs: list, device: torch.device, sync: bool = True) -> Any:
    """One forward under no_grad; with `sync`, the device is waited for, so an asynchronous
    error of the forward's kernels is reported as the forward's. Without it the caller must
    wait itself (inside `forward_errors`)."""
    with forward_errors():
        with torch.no_grad():
            # The process's first call also records what it alone costs in device memory.
            result = memory.observe_first_call(lambda: model(*inputs), device)
        if sync:
            devices.synchronize(device)
        return result


@contextlib.contextmanager
def forward_errors():
    """Turns any failure inside the block into the forward's runtime error (a verdict)."""
    try:
        yield
    except WorkerError:
        raise
    except BaseException as error:  # noqa: BLE001 - the forward's failure is a verdict
        import traceback

        raise WorkerError(
            "runtime_error",
            f"forward raised {type(error).__name__}: {trim(str(error), 1500)}",
            trim(traceback.format_exc()),
        ) from error


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "device": str(device),
        "numerics": numerics.snapshot(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            {
                "device_name": props.name,
                "compute_capability": f"{props.major}.{props.minor}",
                "sm_count": props.multi_processor_count,
                "device_memory_bytes": props.total_memory,
                "l2_cache_bytes": getattr(props, "L2_cache_size", None),
                "cuda_runtime": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
            }
        )
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            env["driver"] = pynvml.nvmlSystemGetDriverVersion()
            env["sm_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
            env["max_sm_clock_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
            env["power_limit_w"] = pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000
        except Exception as error:  # NVML is optional: the run goes on without clocks
            env["nvml"] = f"unavailable: {type(error).__name__}"
    else:
        env["device_name"] = platform.processor() or platform.machine()
        env["cpu_threads"] = torch.get_num_threads()
    return env


# Seconds the worker process took to be ready for commands (interpreter, torch's and the role's
# imports): the cost of its start, without any idle wait after it (a spare or a worker started
# ahead waits for its first command). kbv.worker sets it; 0 where a role is hosted otherwise.
WORKER_READY_S = 0.0


class Laps:
    """Seconds each step of a command took, in order: a load's answer carries them, and the
    call trace (KBV_TRACE_CALLS) keeps them, so that a slow load says which step was slow."""

    def __init__(self, **before: float) -> None:
        self.seconds: dict[str, float] = {k: round(v, 4) for k, v in before.items()}
        self._last = time.monotonic()

    def lap(self, step: str) -> None:
        now = time.monotonic()
        self.seconds[step] = round(now - self._last, 4)
        self._last = now
