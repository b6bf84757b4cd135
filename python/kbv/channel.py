"""The worker's private channel to the orchestrator: one JSON object per line, over two file
descriptors handed down by the orchestrator (never stdout, which belongs to the hosted code)."""

from __future__ import annotations

import json
import os
from typing import Any


class Channel:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", closefd=True)
        self._write_fd = write_fd

    def receive(self) -> dict[str, Any] | None:
        line = self._reader.readline()
        if not line:
            return None
        return json.loads(line)

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, allow_nan=False, default=str) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._write_fd, view)
            view = view[written:]
