"""One shard of `kbv run --ray` on a Ray node: the shard's problem and candidate files are
written into a node-local folder in their layout, kbv's own engine evaluates them there (`kbv run`
with a node-local database and build cache), and each row is yielded as that database stores it.

This runs as a Ray streaming task (the driver, kbv/ray_run.py, submits it), so it imports nothing
from Ray at module level; the node needs kbv installed (the `kbv` command, or KBV_BIN naming it)
with the same version and PyTorch as the driver's."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

POLL_SECONDS = 0.5  # how often the node's database is looked at for new rows
OUTPUT_TAIL_CHARS = 2000


class ShardError(RuntimeError):
    """The node cannot run kbv at all (no kbv command): the task fails with this message."""


def kbv_command() -> str:
    """The node's kbv: KBV_BIN in the node's environment (a build tree), else `kbv` on PATH."""
    explicit = os.environ.get("KBV_BIN")
    if explicit:
        return explicit
    found = shutil.which("kbv")
    if not found:
        raise ShardError(
            "no kbv on this node: install kbv here (scripts/setup.sh) or start the node's Ray "
            "with KBV_BIN naming the kbv binary"
        )
    return found


def killed_with_parent():
    """A preexec_fn under which the node's kbv is killed when the Ray worker running this task
    dies (its node lost, the task cancelled): an orphan would go on evaluating work sent
    elsewhere. prctl is looked up here, before the fork: the child only calls it."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    PR_SET_PDEATHSIG = 1

    def set_parent_death_signal() -> None:  # pragma: no cover - runs in the child
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return set_parent_death_signal


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Each file at its relative path under `folder`; a path leaving it is refused."""
    root = folder.resolve()
    for relative, content in files.items():
        target = (root / relative).resolve()
        if root not in target.parents:
            raise ShardError(f"refused to write {relative!r} outside the shard's folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


class StoreWatcher:
    """The rows a kbv database holds that were not yet seen, read through `kbv export` (kbv's own
    reader: the schema stays kbv's), and only when the database's files changed."""

    def __init__(self, kbv: str, database: Path):
        self.kbv = kbv
        self.database = database
        self.seen: set[str] = set()
        self.signature: tuple | None = None

    def _files_signature(self) -> tuple:
        parts = []
        for suffix in ("", "-wal"):
            path = Path(f"{self.database}{suffix}")
            stat = path.stat() if path.exists() else None
            parts.append((stat.st_size, stat.st_mtime_ns) if stat else None)
        return tuple(parts)

    def new_rows(self) -> list[dict]:
        if not self.database.exists():
            return []
        signature = self._files_signature()
        if signature == self.signature:
            return []
        done = subprocess.run(
            [self.kbv, "export", str(self.database)], capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            return []  # read again at the next change or at the end
        self.signature = signature
        rows = []
        for line in done.stdout.splitlines():
            row = json.loads(line)
            key = row["_row"]["key"]
            if key not in self.seen:
                self.seen.add(key)
                rows.append(row)
        return rows


SHARD_FOLDER_PREFIX = "kbv-shard-"


def shard_folder() -> Path:
    """A new node-local folder for a shard, named after this process so that a later task can
    tell it was abandoned."""
    return Path(tempfile.mkdtemp(prefix=f"{SHARD_FOLDER_PREFIX}{os.getpid()}-"))


def reclaim_abandoned_folders(root: Path | None = None) -> int:
    """Removes the shard folders whose task's process is gone (a task killed with its node's
    Ray worker never ran its clean-up); returns how many. kbv's own work folders of a killed run
    are reclaimed by the next kbv run on the node."""
    removed = 0
    for folder in Path(root or tempfile.gettempdir()).glob(f"{SHARD_FOLDER_PREFIX}*"):
        owner = folder.name[len(SHARD_FOLDER_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def node_identity() -> dict:
    import ray

    context = ray.get_runtime_context()
    return {"node": ray.util.get_node_ip_address(), "node_id": context.get_node_id()}


def evaluate_shard(
    files: dict[str, bytes], device: str, node_arguments: list[str]
) -> Iterator[dict]:
    """The shard is `files`: its problem under problems/, its candidates under candidates/, by
    their paths relative to the trees. Yields {"event": "started"}, one {"event": "row", "row":
    ...} per result as the node's kbv stores it (a line of `kbv export`), and {"event": "ended",
    "status", "output"} at the end."""
    identity = node_identity()
    kbv = kbv_command()
    yield {"event": "started", **identity}
    reclaim_abandoned_folders()
    folder = shard_folder()
    try:
        write_files(folder, files)
        database = folder / "shard.sqlite"
        log = folder / "kbv.log"
        command = [
            kbv, "run", "--problems", str(folder / "problems"),
            "--candidates", str(folder / "candidates"), "--db", str(database),
            "--device", device, "-q", *node_arguments,
        ]  # fmt: skip
        watcher = StoreWatcher(kbv, database)
        with open(log, "wb") as output:
            process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, preexec_fn=killed_with_parent()
            )
        try:
            while True:
                status = process.poll()  # before reading: once it has ended, this read is the last
                for row in watcher.new_rows():
                    yield {"event": "row", **identity, "row": row}
                if status is not None:
                    break
                time.sleep(POLL_SECONDS)
        finally:
            if process.poll() is None:  # the generator was closed or cancelled
                process.kill()
                process.wait()
        # Paths in kbv's words relative to the trees, as the driver's user knows them.
        text = log.read_text(errors="replace")
        for tree in ("problems", "candidates"):
            text = text.replace(f"{folder / tree}/", "")
        yield {"event": "ended", **identity, "status": status, "output": text[-OUTPUT_TAIL_CHARS:]}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
