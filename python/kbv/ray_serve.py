"""The Ray driver of `kbv serve --ray ADDRESS` (run as `python -m kbv.ray_serve` by the service,
which owns the queue and the database; see src/serve/ray_pool.hpp and docs/serve.md).

The service sends batches as it takes them from its queue, one JSON line each on this driver's
standard input: {"submit": <shard>}, a shard as in `kbv run --ray`'s plan (a problem, its
candidates' files and store keys) with its name and the node's `kbv run` options for its
settings. Each runs as a Ray task through ShardQueue (kbv/ray_run.py), kbv's own engine on a node,
and its events come back as JSON lines on standard output: "started" (a node took it), "row" (a
result the node stored), "missing" (keys it ended without: its problem could not be evaluated
there, or its node was lost too often). A lost node's batch is sent again with what did not come
back, as for `kbv run --ray`. Besides: {"event": "ready", "cluster"} once connected, and
{"event": "cluster", ...} whenever the cluster's live nodes change (the service's /v1/health).
The end of standard input ends the driver once every batch sent has ended."""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from kbv.ray_run import Shard, ShardQueue, connect, emit, say_on_stderr

POLL_SECONDS = 0.2  # how long one wait for a task's event or a submission lasts
CLUSTER_SECONDS = 2.0  # how often the cluster's nodes are looked at


def cluster_state(nodes: list[dict], device: str) -> dict:
    """The live nodes of `ray.nodes()` with their CPUs and GPUs, and the batches they can run at
    once ("slots": each task holds a CPU, and a GPU on the cuda device)."""
    live = []
    for node in nodes:
        if not node.get("Alive"):
            continue
        resources = node.get("Resources") or {}
        cpus, gpus = int(resources.get("CPU", 0)), int(resources.get("GPU", 0))
        live.append(
            {
                "node_id": node.get("NodeID", ""),
                "address": node.get("NodeManagerAddress", "?"),
                "cpus": cpus,
                "gpus": gpus,
                "slots": min(cpus, gpus) if device == "cuda" else cpus,
            }
        )
    live.sort(key=lambda n: (n["address"], n["node_id"]))
    return {
        "nodes": live,
        "cpus": sum(n["cpus"] for n in live),
        "gpus": sum(n["gpus"] for n in live),
        "slots": sum(n["slots"] for n in live),
    }


def read_commands(stream: TextIO, commands: queue.Queue) -> None:
    """Each line of `stream` into `commands`, then None at its end."""
    for line in stream:
        if line.strip():
            commands.put(line)
    commands.put(None)


def submit(shards: ShardQueue, line: str, send: Callable[[dict], None]) -> None:
    """A submission line into the queue. A shard whose files cannot be read (the service's
    sources folder was cleared under it) comes back at once as missing."""
    try:
        entry = json.loads(line)["submit"]
        shard = Shard.from_plan(entry)
    except (ValueError, KeyError, TypeError) as error:
        print(f"kbv: ray_serve: a submission that cannot be read ({error})", file=sys.stderr)
        return
    try:
        shards.submit(shard)
    except OSError as error:
        send(
            {
                "event": "missing",
                "shard": shard.name,
                "keys": sorted(shard.keys()),
                "why": f"its files could not be read: {error}",
                "fault": "harness",
            }
        )


def serve(
    shards: ShardQueue,
    commands: queue.Queue,
    look: Callable[[], dict],
    send: Callable[[dict], None] = emit,
    look_every: float = CLUSTER_SECONDS,
) -> None:
    """Until the submissions end (None in `commands`) and every shard submitted has ended:
    submissions in, events out, and the cluster's state whenever it changes."""
    state = look()
    send({"event": "ready", "cluster": state})
    reading, next_look = True, time.monotonic() + look_every
    while reading or shards.running():
        # Submissions first; wait for one only while no shard runs (else for a shard's event).
        wait = POLL_SECONDS if not shards.running() else 0.0
        while reading:
            try:
                line = commands.get(timeout=wait) if wait else commands.get_nowait()
            except queue.Empty:
                break
            wait = 0.0
            if line is None:
                reading = False
            else:
                submit(shards, line, send)
        for event in shards.poll(timeout=POLL_SECONDS):
            send(event)
        if time.monotonic() >= next_look:
            next_look = time.monotonic() + look_every
            now = look()
            if now != state:
                state = now
                send({"event": "cluster", **state})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbv.ray_serve", description=__doc__)
    parser.add_argument("--address", required=True, help="the cluster: HEAD:PORT or auto")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--attempts", type=int, default=3, help="per batch, for lost nodes")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    ray = connect(args.address, args.device, "kbv serve --ray")
    if ray is None:
        return 2
    try:
        shards = ShardQueue(args.device, [], args.attempts, None if args.quiet else say_on_stderr)
        commands: queue.Queue = queue.Queue()
        threading.Thread(target=read_commands, args=(sys.stdin, commands), daemon=True).start()
        serve(shards, commands, lambda: cluster_state(ray.nodes(), args.device))
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
