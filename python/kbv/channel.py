"""The worker's private channel to the orchestrator: one JSON object per line, over two file
descriptors handed down by the orchestrator (never stdout, which belongs to the hosted code),
and a third, a SOCK_SEQPACKET socket, that carries file descriptors only (SCM_RIGHTS): the
shared blocks of a case travel as descriptors (docs/case-path.md). A message that comes with
descriptors says how many (`fds`); they are sent before the line that announces them."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

MAX_FDS = 64  # descriptors in one message; a case needs a handful


class ChannelError(Exception):
    """The orchestrator's side broke the protocol (kbv's own fault, never the hosted code's)."""


class Channel:
    def __init__(self, read_fd: int, write_fd: int, fd_socket: int | None = None) -> None:
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", closefd=True)
        self._write_fd = write_fd
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
        data = (json.dumps(message, allow_nan=False, default=str) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._write_fd, view)
            view = view[written:]
