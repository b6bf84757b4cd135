"""The resource a worker's error names (python/kbv/worker.py `_resource`): what turns a failure
of the reference into the harness fault `out_of_memory` (retried with the device alone) or
`disk_full` rather than kbv's internal fault. The messages are the ones seen on the H200."""

import errno

import pytest
from kbv import worker


@pytest.mark.parametrize(
    "message",
    [
        "kbv_native: cudaMallocAsync failed: cudaErrorMemoryAllocation: out of memory",
        "kbv_native: cudaMalloc(&buffer.data, buffer.bytes) failed: cudaErrorMemoryAllocation: "
        "out of memory",
        "kbv_native: cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "CUDA out of memory. Tried to allocate 12.00 GiB",
        "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    ],
)
def test_device_memory_shortages_are_out_of_memory(message):
    assert worker.exhausted_resource(RuntimeError(message)) == "out_of_memory"
    # ... of the device's: what the candidate held there is weighed (src/judge/held_memory.hpp)
    error = worker._with_resource({}, RuntimeError(message))
    assert error == {"resource": "out_of_memory", "memory": "device"}


def test_host_memory_shortages_are_told_apart_from_the_devices():
    torch = pytest.importorskip("torch")
    for error in (
        MemoryError(),
        OSError(errno.ENOMEM, "Cannot allocate memory"),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 12 GB"),
    ):
        assert worker._with_resource({}, error) == {"resource": "out_of_memory", "memory": "host"}
    device = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")
    assert worker._with_resource({}, device)["memory"] == "device"
    try:
        try:
            raise device
        except torch.OutOfMemoryError as inner:
            raise RuntimeError("drawing the case failed") from inner
    except RuntimeError as outer:
        assert worker._with_resource({}, outer)["memory"] == "device"  # its cause is followed
    assert "memory" not in worker._with_resource({}, ValueError("shapes do not match"))


def test_a_cause_is_followed_and_disk_full_is_told_apart():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("writing the case failed") from inner
    except RuntimeError as error:
        assert worker.exhausted_resource(error) == "disk_full"


def test_other_errors_name_no_resource():
    assert (
        worker.exhausted_resource(RuntimeError("cudaErrorIllegalAddress: an illegal memory access"))
        is None
    )
    assert worker.exhausted_resource(ValueError("shapes do not match")) is None
