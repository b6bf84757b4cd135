"""The Ray driver of `kbv run --ray ADDRESS` (run as `python -m kbv.ray_run --plan FILE` by the
kbv command, which owns the database; see src/schedule/ray_run.hpp and docs/distributed.md).

It reads the plan kbv wrote (the shards: one problem each, its candidates' files and store keys),
submits one Ray task per shard (kbv/ray_shard.py: kbv's engine on the node), and relays each row
a node stores to kbv as a JSON line on standard output; progress lines go to standard error.

A node lost mid-shard: the shard is submitted again (up to the plan's attempts) with only the
tasks whose rows have not come back, so a lost node costs only its unfinished work and nothing is
evaluated, or relayed, twice. Ray's own task retry is off on purpose: it replays a streaming task
from its start and matches the items by position, which would resend rows already stored and
cannot leave out the tasks already done.

ShardQueue is the part a queue of work uses (kbv/ray_serve.py: `kbv serve --ray` sends its queue
to the cluster): submit shards as they come, take events as they come (poll) or until every shard
has ended (events)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kbv.ray_shard import evaluate_shard

RAY_PIN = "ray==2.60.0"  # as scripts/setup.sh installs it


NODE_ID_CHARS = 12  # of a node's id in progress lines: enough to tell nodes apart


def tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def say_on_stderr(line: str) -> None:
    # On a terminal kbv keeps its counters on one status line, rewritten in place: a line of
    # ours replaces it rather than running on after it.
    clear = "\r\033[K" if sys.stderr.isatty() else ""
    print(f"{clear}[kbv] {line}", file=sys.stderr, flush=True)


@dataclass
class PlannedTask:
    key: str  # the store key: content of problem and candidate, and the settings
    path: str  # the candidate on this machine
    relative: str  # its path under the candidate root, recreated on the node


@dataclass
class Shard:
    """One problem and the candidates of it left to evaluate: the unit sent to a node (a problem's
    candidates together, so its reference session serves them all there)."""

    problem_path: str
    problem_relative: str
    tasks: list[PlannedTask]
    label: str | None = None  # its name in progress lines and events (default: the problem's)
    # The node's `kbv run` options for this shard (kbv serve: each batch's settings); None: the
    # queue's.
    node_arguments: list[str] | None = None

    @classmethod
    def from_plan(cls, entry: dict) -> Shard:
        problem = entry["problem"]
        tasks = [PlannedTask(t["key"], t["path"], t["relative"]) for t in entry["tasks"]]
        arguments = entry.get("node_arguments")
        return cls(
            problem["path"],
            problem["relative"],
            tasks,
            entry.get("name"),
            None if arguments is None else [str(a) for a in arguments],
        )

    @property
    def name(self) -> str:
        return self.label or self.problem_relative

    def keys(self) -> set[str]:
        return {task.key for task in self.tasks}

    def files(self, keys: set[str]) -> dict[str, bytes]:
        """The node's folder: the problem and the candidates of `keys`, by relative path."""
        files = {f"problems/{self.problem_relative}": Path(self.problem_path).read_bytes()}
        for task in self.tasks:
            if task.key in keys:
                files[f"candidates/{task.relative}"] = Path(task.path).read_bytes()
        return files


@dataclass
class Attempt:
    shard: Shard
    number: int  # 1 for the first
    keys: set[str]  # the tasks sent
    received: set[str] = field(default_factory=set)
    node: str = "?"
    status: int | None = None
    output: str = ""

    def left(self) -> set[str]:
        return self.keys - self.received


BROKEN_PROBLEM = "could not be evaluated (its candidates were skipped): "


def why_missing(attempt: Attempt) -> str:
    """What the node's kbv said about the tasks it stored nothing for (a broken problem's line of
    its summary, or its exit status and last words)."""
    lines = attempt.output.splitlines()
    where = f"on {attempt.node}"
    if attempt.status not in (0, None):
        tail = " | ".join(lines[-3:])
        return f"kbv {where} ended with status {attempt.status}: {tail}"
    for line in lines:  # kbv run's summary line for a problem it could not evaluate
        if BROKEN_PROBLEM in line:
            return f"{where}: {line.split(BROKEN_PROBLEM, 1)[1]}"
    return f"{where}: kbv stored no result for it"


def problem_broken(attempt: Attempt) -> bool:
    """Whether the node's kbv ended well but could not evaluate the problem (the request's fault
    under `kbv serve --ray`, not the cluster's)."""
    return attempt.status in (0, None) and any(
        BROKEN_PROBLEM in line for line in attempt.output.splitlines()
    )


class ShardQueue:
    """Shards in, events out. Each shard runs as one Ray task holding one GPU (one CPU on the CPU
    device); its events are {"event": "started", "shard", "node", "node_id", "attempt"} when a
    node starts it (again after a lost node), {"event": "row", "node", "row"} per row a node
    stored, and {"event": "missing", "shard", "keys", "why"} when it ended without some of its
    rows. Every key of a shard comes back once, as a row or in a missing event.
    """

    def __init__(
        self,
        device: str,
        node_arguments: list[str],
        attempts: int = 3,
        say: Callable[[str], None] | None = say_on_stderr,
    ):
        import ray

        self._ray = ray
        self.device = device
        self.node_arguments = list(node_arguments)
        self.attempts = max(1, attempts)
        self.say = say or (lambda line: None)
        self._task = ray.remote(evaluate_shard)
        self._options = {
            "num_returns": "streaming",
            "max_retries": 0,  # see the module's comment: the driver sends a lost shard again
            "num_cpus": 1,
            "num_gpus": 1 if device == "cuda" else 0,
        }
        self._running: dict = {}  # the task's generator -> its Attempt

    def submit(self, shard: Shard) -> None:
        self._start(Attempt(shard, 1, shard.keys()))

    def _start(self, attempt: Attempt) -> None:
        files = attempt.shard.files(attempt.keys)
        # Named after its problem: `ray list tasks` and Ray's dashboard say what each one does.
        task = self._task.options(**self._options, name=f"kbv {attempt.shard.name}")
        arguments = attempt.shard.node_arguments
        generator = task.remote(
            files, self.device, self.node_arguments if arguments is None else arguments
        )
        self._running[generator] = attempt

    def running(self) -> int:
        """Shards not ended yet."""
        return len(self._running)

    def events(self) -> Iterator[dict]:
        """Until every shard submitted has ended (shards submitted between two events
        included)."""
        while self._running:
            yield from self.poll()

    def poll(self, timeout: float | None = None) -> Iterator[dict]:
        """The events of a shard that has one within `timeout` seconds (None: until one has);
        nothing when none has, or none runs."""
        ray = self._ray
        if not self._running:
            return
        ready, _ = ray.wait(list(self._running), num_returns=1, timeout=timeout)
        for generator in ready:
            attempt = self._running[generator]
            try:
                item = ray.get(next(generator))
            except StopIteration:
                del self._running[generator]
                yield from self._ended(attempt)
                continue
            except ray.exceptions.RayTaskError as error:
                # The task itself failed (no kbv on the node): the same anywhere, not retried.
                del self._running[generator]
                yield self._missing(attempt, f"the task failed on {attempt.node}: {error}")
                continue
            except ray.exceptions.RayError as error:
                del self._running[generator]
                yield from self._lost(attempt, error)
                continue
            yield from self._item(attempt, item)

    def _item(self, attempt: Attempt, item: dict) -> Iterator[dict]:
        kind = item.get("event")
        if kind == "started":
            attempt.node = item["node"]
            again = f", attempt {attempt.number}" if attempt.number > 1 else ""
            self.say(
                f"ray: {attempt.shard.name} ({tasks(len(attempt.keys))}{again}) started on "
                f"{item['node']} (node {item['node_id'][:NODE_ID_CHARS]})"
            )
            yield {
                "event": "started",
                "shard": attempt.shard.name,
                "node": item["node"],
                "node_id": item["node_id"],
                "attempt": attempt.number,
            }
        elif kind == "row":
            key = item["row"]["_row"]["key"]
            ours = key in attempt.keys and key not in attempt.received
            # A key the shard never planned (a node of another kbv computes other keys) is relayed
            # too, for kbv to say so (it stores nothing of it); a planned one comes once.
            foreign = key not in attempt.shard.keys()
            if ours:
                attempt.received.add(key)
            if ours or foreign:
                yield {
                    "event": "row",
                    "node": item["node"],
                    "node_id": item["node_id"],
                    "row": item["row"],
                }
        elif kind == "ended":
            attempt.status, attempt.output = item["status"], item["output"]

    def _ended(self, attempt: Attempt) -> Iterator[dict]:
        if attempt.left():
            fault = "problem" if problem_broken(attempt) else "harness"
            yield self._missing(attempt, why_missing(attempt), fault)

    def _lost(self, attempt: Attempt, error: Exception) -> Iterator[dict]:
        left = attempt.left()
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
        if not left:
            return
        if attempt.number >= self.attempts:
            yield self._missing(
                attempt,
                f"its node was lost {attempt.number} times (last: {first_line}); "
                "a rerun evaluates what is missing",
            )
            return
        self.say(
            f"ray: {attempt.shard.name}: lost its node {attempt.node} ({type(error).__name__}); "
            f"{len(left)} of its {len(attempt.keys)} tasks submitted again "
            f"(attempt {attempt.number + 1} of {self.attempts})"
        )
        self._start(Attempt(attempt.shard, attempt.number + 1, left))

    def _missing(self, attempt: Attempt, why: str, fault: str = "harness") -> dict:
        """`fault`: "problem" where the problem could not be evaluated, else "harness"."""
        left = sorted(attempt.left())
        self.say(f"ray: {attempt.shard.name}: {tasks(len(left))} not evaluated: {why}")
        return {
            "event": "missing",
            "shard": attempt.shard.name,
            "keys": left,
            "why": why,
            "fault": fault,
        }


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def connect(address: str, device: str, command: str):
    """Ray, connected to the cluster at `address` as a driver, or None after saying on standard
    error why not (no Ray here, no cluster there, or none of the resource `device`'s tasks ask
    for: they would wait for ever). The caller calls ray.shutdown() when it is done."""
    try:
        import ray
    except ImportError:
        print(
            f"kbv: {command} needs Ray in the Python kbv uses ({sys.executable}): "
            f"{sys.executable} -m pip install '{RAY_PIN}'",
            file=sys.stderr,
        )
        return None
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as error:
        print(f"kbv: cannot connect to the Ray cluster at {address}: {error}", file=sys.stderr)
        return None
    needed = "GPU" if device == "cuda" else "CPU"
    if not ray.cluster_resources().get(needed):
        hint = ": give --device cpu to evaluate on its CPUs" if needed == "GPU" else ""
        print(f"kbv: the Ray cluster at {address} has no {needed}{hint}", file=sys.stderr)
        ray.shutdown()
        return None
    return ray


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbv.ray_run", description=__doc__)
    parser.add_argument("--plan", required=True, help="the plan kbv run --ray wrote")
    args = parser.parse_args(argv)
    plan = json.loads(Path(args.plan).read_text())
    say = None if plan.get("quiet") else say_on_stderr
    ray = connect(plan["address"], plan["device"], "kbv run --ray")
    if ray is None:
        return 2
    try:
        queue = ShardQueue(plan["device"], plan["node_arguments"], plan.get("attempts", 3), say)
        for entry in plan["shards"]:
            queue.submit(Shard.from_plan(entry))
        for event in queue.events():
            emit(event)
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
