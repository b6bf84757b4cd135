"""Entry point of a worker process: `python -m kbv.worker --role reference|candidate
--in FD --out FD`. Serves the orchestrator's requests over the private channel until told to
exit or the channel closes. Every failure is answered as a classified error; a crash or a hang
is the orchestrator's to observe."""

from __future__ import annotations

import argparse
import errno
import os
import sys
import time
import traceback

# When the process began (before torch and the role's imports): a load's answer says how long
# the process took to be ready (`process_start` in its `load_phases_s`; kbv.hosting).
STARTED = time.monotonic()

from .channel import Channel  # noqa: E402 - after STARTED, by design
from .loading import WorkerError, trim  # noqa: E402


def serve(role, channel: Channel) -> None:
    while True:
        request = channel.receive()
        if request is None or request.get("cmd") == "exit":
            return
        # Every answer names the request it answers (docs/worker-protocol.md).
        seq = {"seq": request["seq"]} if "seq" in request else {}
        handler = getattr(role, f"cmd_{request.get('cmd')}", None)
        if handler is None:
            channel.send(
                {
                    "ok": False,
                    "error": {
                        "kind": "internal_error",
                        "message": f"unknown command {request.get('cmd')!r}",
                    },
                    **seq,
                }
            )
            continue
        try:
            # A role may need to finish something before a command (the reference places a model
            # it loaded on the host: kbv.reference.ReferenceRole.before_command).
            before = getattr(role, "before_command", None)
            if before is not None:
                before(request.get("cmd"))
            result = handler(request)
            outgoing = result.pop("_fds", None) if isinstance(result, dict) else None
            try:
                channel.send({"ok": True, "result": result, **seq}, outgoing)
            finally:
                for fd in outgoing or []:  # exported for this answer: the receiver has its own
                    os.close(fd)
        except WorkerError as error:
            channel.send(
                {
                    "ok": False,
                    "error": _with_resource(
                        {"kind": error.kind, "message": error.message, "detail": error.detail},
                        error,
                        role,
                    ),
                    **seq,
                }
            )
        except BaseException as error:  # noqa: BLE001 - report, let the orchestrator decide
            channel.send(
                {
                    "ok": False,
                    "error": _with_resource(
                        {
                            "kind": "runtime_error" if _in_hosted_code() else "internal_error",
                            "message": f"{type(error).__name__}: {trim(str(error), 1500)}",
                            "detail": trim(traceback.format_exc()),
                        },
                        error,
                        role,
                    ),
                    **seq,
                }
            )
        finally:
            # Descriptors a handler did not take (it failed first) are closed here.
            for fd in request.get("fds_received", []):
                os.close(fd)


# Words of failures whose exception carries no errno: safetensors' writer (SafetensorError:
# "... No space left on device (os error 28)") and torch's CPU allocator (a RuntimeError:
# "DefaultCPUAllocator: can't allocate memory").
_DISK_FULL_WORDS = ("No space left on device", "Disk quota exceeded", "os error 28", "os error 122")
# Out-of-memory words of the device: kbv_native's (a shared block the driver could not make;
# its runtime allocations, the device measurement's buffers and the timing's L2 flush, seen on
# the H200 with six evaluations on the device, session 10, call 2, where they were reported as
# kbv's internal fault instead of a memory shortage retried alone), torch's (its caching
# allocator; a raw cudaMalloc, a host allocation or a stream that failed) and the libraries' when
# their workspace cannot be had.
_DEVICE_MEMORY_WORDS = (
    "CUDA out of memory",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorMemoryAllocation",
    "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
)
_OUT_OF_MEMORY_WORDS = ("can't allocate memory", "Cannot allocate memory", *_DEVICE_MEMORY_WORDS)


def _links(error: BaseException):
    """The error and those it was raised from (at most 8), each with its text."""
    current: BaseException | None = error
    for _ in range(8):
        if current is None:
            return
        try:
            text = str(current)
        except Exception:  # noqa: BLE001 - a hosted exception whose __str__ raises
            text = ""
        yield current, text
        current = current.__cause__ or current.__context__


def exhausted_resource(error: BaseException) -> str | None:
    """The resource whose exhaustion the error (or an error it was raised from) reports:
    "out_of_memory" or "disk_full". The orchestrator trusts this only from the reference worker
    (src/judge/harness_fault.hpp): the candidate's process can write anything on its channel."""
    for current, text in _links(error):
        if isinstance(current, MemoryError) or type(current).__name__ in (
            "OutOfMemoryError",
            "PlanChosenUnderPressure",
        ):
            return "out_of_memory"
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return "disk_full"
        if isinstance(current, OSError) and current.errno == errno.ENOMEM:
            return "out_of_memory"
        if any(words in text for words in _DISK_FULL_WORDS):
            return "disk_full"
        if any(words in text for words in _OUT_OF_MEMORY_WORDS):
            return "out_of_memory"
    return None


def _memory_of(error: BaseException) -> str:
    """Which memory an out-of-memory error ran out of: "device" (torch's CUDA OutOfMemoryError,
    or the device's words), "library_plan" (kbv.plan_pressure's refusal) or "host". The
    orchestrator weighs what the candidate held of the device's (src/judge/held_memory.hpp)."""
    for current, text in _links(error):
        if type(current).__name__ == "PlanChosenUnderPressure":
            # A library plan chosen for want of room (weighed like the device's memory against
            # what the candidate holds: src/eval/held_memory.cpp).
            return "library_plan"
        if type(current).__name__ == "OutOfMemoryError":
            return "device"
        if any(words in text for words in _DEVICE_MEMORY_WORDS):
            return "device"
    return "host"


def _with_resource(payload: dict, error: BaseException, role=None) -> dict:
    resource = exhausted_resource(error)
    if resource:
        payload["resource"] = resource
    if resource == "out_of_memory":
        payload["memory"] = _memory_of(error)
        # What the role held when it ran out (the reference's cases, models and blocks), so the
        # fault says whose memory it was; never a second failure in the answer's place.
        holding = getattr(role, "holding_words", None)
        if holding is not None:
            try:
                payload["holding"] = holding()
            except Exception as failure:  # noqa: BLE001 - the account is a courtesy
                payload["holding"] = f"(not told: {type(failure).__name__}: {failure})"
    return payload


def _in_hosted_code() -> bool:
    """Errors raised from problem or candidate frames are theirs, not the worker's."""
    tb = sys.exc_info()[2]
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__", "").startswith(("kbv_problem_", "kbv_candidate_")):
            return True
        tb = tb.tb_next
    return False


def main() -> None:
    parser = argparse.ArgumentParser(prog="kbv.worker")
    parser.add_argument("--role", choices=["reference", "candidate"], required=True)
    parser.add_argument("--in", dest="read_fd", type=int, required=True)
    parser.add_argument("--out", dest="write_fd", type=int, required=True)
    parser.add_argument("--fds", dest="fd_socket", type=int, default=None)
    args = parser.parse_args()
    channel = Channel(args.read_fd, args.write_fd, args.fd_socket)
    if args.role == "reference":
        from .reference import ReferenceRole, warm_meta_dispatch_in_background

        role = ReferenceRole()
        warm_meta_dispatch_in_background()
    else:
        from .candidate import CandidateRole

        role = CandidateRole()
    from . import hosting

    hosting.WORKER_READY_S = time.monotonic() - STARTED
    serve(role, channel)
    sys.stdout.flush()
    # Skip interpreter teardown: hosted extensions and CUDA contexts can crash or hang in
    # their destructors, which would turn a finished evaluation into a spurious failure.
    os._exit(0)


if __name__ == "__main__":
    main()
