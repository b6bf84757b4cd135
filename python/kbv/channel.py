"""The worker's private channel to the orchestrator: one JSON object per line, over two file
descriptors handed down by the orchestrator (never stdout, which belongs to the hosted code),
and a third, a SOCK_SEQPACKET socket, that carries file descriptors only (SCM_RIGHTS): the
shared blocks of a case travel as descriptors (docs/case-path.md). A message that comes with
descriptors says how many (`fds`); they are sent before the line that announces them.

Every answer carries the `seq` of the request it answers (the orchestrator numbers its
requests): a line the hosted code forges on the answer descriptor arrives beside the worker's own
answer, and two answers to one request, or one to no request, end the evaluation as forged. The
worker writes through a copy of the answer descriptor it made before any hosted code ran, and
checks before each answer that the copy still is the channel it was: hosted code that points the
descriptor it inherited (the one named on the command line) elsewhere, to swallow the worker's
real answer, swallows nothing."""

from __future__ import annotations

import fcntl
import json
import os
import socket
from typing import Any

MAX_FDS = 64  # descriptors in one message; a case needs a handful
PRIVATE_FD_FLOOR = 200  # where the worker's own copy of the answer descriptor goes

# Bound before any hosted code runs (kbv bindings: the harness snapshot protects them).
_dumps = json.dumps
_write = os.write
_fstat = os.fstat
_dupfd = fcntl.fcntl


class ChannelError(Exception):
    """The orchestrator's side broke the protocol (kbv's own fault, never the hosted code's)."""


class Channel:
    # No instance dict: hosted code cannot shadow `send` on the one instance the worker uses.
    __slots__ = ("_reader", "_write_fd", "_identity", "_fds")

    def __init__(self, read_fd: int, write_fd: int, fd_socket: int | None = None) -> None:
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", closefd=True)
        self._write_fd = _dupfd(write_fd, fcntl.F_DUPFD_CLOEXEC, PRIVATE_FD_FLOOR)
        self._identity = _identity(self._write_fd)
        self._fds = socket.socket(fileno=fd_socket) if fd_socket is not None else None

    def receive(self) -> dict[str, Any] | None:
        line = self._reader.readline()
        if not line:
            return None
        message = json.loads(line)
        count = int(message.get("fds", 0) or 0)
        if count:
            message["fds_received"] = self.receive_fds(count)
        return message

    def receive_fds(self, count: int) -> list[int]:
        if self._fds is None:
            raise ChannelError("descriptors were announced but this worker has no fd socket")
        _, fds, _, _ = socket.recv_fds(self._fds, 16, MAX_FDS)
        if len(fds) != count:
            for fd in fds:
                os.close(fd)
            raise ChannelError(f"expected {count} descriptors, received {len(fds)}")
        return list(fds)

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        if fds:
            if self._fds is None:
                raise ChannelError("this worker has no fd socket to send descriptors on")
            socket.send_fds(self._fds, [b"fds"], fds)
            message = {**message, "fds": len(fds)}
        data = (_dumps(message, allow_nan=False, default=str) + "\n").encode()
        if _identity(self._write_fd) != self._identity:
            # Replaced under the worker: no answer can reach the orchestrator any more.
            os._exit(EXIT_CHANNEL_REPLACED)
        view = memoryview(data)
        while view:
            written = _write(self._write_fd, view)
            view = view[written:]


EXIT_CHANNEL_REPLACED = 86


def _identity(fd: int) -> tuple[int, int]:
    try:
        stat = _fstat(fd)
    except OSError:
        return (-1, -1)
    return (stat.st_dev, stat.st_ino)
