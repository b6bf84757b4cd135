"""A GRPO-like batch through `kbv serve` against `kbv run` over the same files.

N samples of one problem (honest, wrong and hacked candidates mixed, each made distinct by a
comment line, as an RL step's completions are) go to a fresh `kbv serve` as one batch; the same
files go through `kbv run` into a database of their own. Printed (and written with --out as
JSON): throughput of each, per-sample latency p50/p99 through the service (batch submitted to
the sample's result available), and whether every sample's verdict is the same in both.

    python bench/serve_grpo.py --device cpu --samples 8 --no-timing          # CPU, small
    python bench/serve_grpo.py --device cuda --samples 64 --workers-per-device 4 --prebuilt

Both runs use the same build cache. By default the one run first (the service) pays for every
build and the other finds them built; --prebuilt builds them all before either is timed (the
evaluation's throughput), --cold gives each side fresh files (both pay: an RL step's cost).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from kbv.client import Client  # noqa: E402

PROBLEM = "level1/3_ReLU"
MIX = {
    "cpu": {
        "honest": ["examples/candidates/cpu/level1/3_ReLU.py"],
        "wrong": ["examples/wrong/relu_zeros.py", "examples/wrong/relu_identity.py"],
        "hacked": ["examples/hacks/b2_ghost_kernel.py", "examples/hacks/s5_content_hash.py"],
    },
    # Hacks the zoo (examples/zoo.json) rejects on a GPU, on this problem.
    "cuda": {
        "honest": ["examples/candidates/cuda/level1/3_ReLU.py"],
        "wrong": ["examples/wrong/relu_zeros.py", "examples/wrong/relu_identity.py"],
        "hacked": [
            "examples/hacks/cuda/t1_side_stream.py",
            "examples/hacks/cuda/b2_ghost_global.py",
            "examples/hacks/s6_inplace_input.py",
        ],
    },
}


def samples(device: str, n: int, tag: str = "") -> list[tuple[str, str]]:
    """(kind, source) x n: half honest, a quarter wrong, a quarter hacked, interleaved."""
    mix = MIX["cuda" if device.startswith("cuda") else "cpu"]
    order = ["honest", "wrong", "honest", "hacked"]
    out = []
    for k in range(n):
        kind = order[k % len(order)]
        files = mix[kind]
        source = (REPO / files[(k // len(order)) % len(files)]).read_text()
        out.append((kind, f"# grpo sample {tag}{k}\n{source}"))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_service(args, work: Path, problem: str, batch: list[tuple[str, str]]) -> dict:
    token = "bench-" + os.urandom(8).hex()
    (work / "token").write_text(token)
    (work / "token").chmod(0o600)  # kbv serve warns about a token others can read
    command = [args.kbv, "serve", "--port", "0", "--token-file", str(work / "token"),
               "--db", str(work / "serve.sqlite"), "--device", args.device, "--quiet",
               "--cache-dir", args.cache_dir, *args.devices_args, *args.eval_args,
               "--max-queue", str(max(1024, len(batch)))]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 120)
        line = server.stdout.readline() if ready else ""
        url = line.split("listening on ")[1].split()[0]
        client = Client(url, token, poll_interval=0.05)
        options = {"problem_name": PROBLEM}
        started = time.monotonic()
        started_unix = time.time()
        ids = client.batch(
            [{"problem": problem, "candidate": src, **options} for _, src in batch], wait=False
        )
        latency: dict[str, float] = {}
        jobs: dict[str, dict] = {}

        def follow(job_id: str) -> None:
            jobs[job_id] = client.result(job_id)
            latency[job_id] = time.monotonic() - started

        threads = [threading.Thread(target=follow, args=(i,)) for i in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        polled_wall = max(latency.values())
        # When each result became available, from the service's own record (its jobs table):
        # the client's polls back off to 5 s apart, so the time a poll first sees a result is
        # late by up to that much, the same for every sample (a measurement of the client).
        with sqlite3.connect(work / "serve.sqlite.serve" / "jobs.sqlite") as db:
            finished = dict(db.execute("SELECT id, finished_at FROM jobs"))
        latency = {i: float(finished[i]) - started_unix for i in ids}
        wall = max(latency.values())
        reused = sum(
            bool(jobs[i]["result"]["problem"].get("reference", {}).get("reused")) for i in ids
        )
        return {
            "wall_s": wall,
            "samples_per_s": len(ids) / wall,
            "latency_p50_s": percentile(list(latency.values()), 0.5),
            "latency_p99_s": percentile(list(latency.values()), 0.99),
            "reference_reused": reused,
            "polled_wall_s": polled_wall,
            "verdicts": [jobs[i]["result"]["verdict"] for i in ids],
        }
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=600)


def run_suite(
    args, work: Path, problem: str, batch: list[tuple[str, str]], name: str = "run"
) -> dict:
    """`kbv run` over the batch written as one run's files, into `name`.sqlite."""
    problems = work / name / "problems" / "level1"
    problems.mkdir(parents=True)
    (problems / "3_ReLU.py").write_text(problem)
    run = work / name / "candidates" / "grpo"
    run.mkdir(parents=True)
    for k, (_, src) in enumerate(batch):
        (run / f"level_1_problem_3_sample_{k}_kernel.py").write_text(src)
    db_path = work / f"{name}.sqlite"
    command = [args.kbv, "run", "--problems", str(work / name / "problems"),
               "--candidates", str(work / name / "candidates"), "--db", str(db_path),
               "--device", args.device, "--quiet", "--cache-dir", args.cache_dir,
               *args.devices_args, *args.eval_args]  # fmt: skip
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.monotonic() - started
    with sqlite3.connect(db_path) as db:
        by_sample = dict(db.execute("SELECT sample, verdict FROM results"))
    return {
        "wall_s": wall,
        "samples_per_s": len(batch) / wall,
        "verdicts": [by_sample.get(k) for k in range(len(batch))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kbv", default=str(REPO / "build" / "kbv"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--devices", default="", help="as kbv run/serve --devices")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument(
        "--workers-per-device",
        type=int,
        default=0,
        help="for both (default: each its own: 1 for serve, kbv run's 1 on CPU and 2-4 on a GPU)",
    )
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "kbv"))
    parser.add_argument("--out", help="write the figures here as JSON")
    parser.add_argument(
        "--prebuilt",
        action="store_true",
        help="build every candidate first (an untimed kbv run over the batch into a database of "
        "its own), so that both timed sides find every build in the cache: the evaluation's "
        "throughput apart from compilation",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="fresh contents for each side (every candidate that compiles builds): the service "
        "and kbv run each pay for their builds; by default both get the same files, and the one "
        "run second finds them built",
    )
    args = parser.parse_args()
    args.devices_args = ["--devices", args.devices] if args.devices else []
    if args.workers_per_device:
        args.devices_args += ["--workers-per-device", str(args.workers_per_device)]
    args.eval_args = ["--profile", args.profile, "--draws", str(args.draws)]
    if args.no_timing:
        args.eval_args.append("--no-timing")
    if args.device.startswith("cuda"):
        args.eval_args += ["--size", "large"]

    problem = (REPO / "problems" / f"{PROBLEM}.py").read_text()
    tag = os.urandom(4).hex() if args.cold else ""
    batch = samples(args.device, args.samples, f"serve-{tag}-" if tag else "")
    run_batch = samples(args.device, args.samples, f"run-{tag}-") if tag else batch
    if args.prebuilt and args.cold:
        parser.error("--prebuilt and --cold contradict each other")
    work = Path(tempfile.mkdtemp(prefix="kbv-serve-bench-"))
    try:
        prebuilt_s = None
        if args.prebuilt:
            prebuilt_s = run_suite(args, work, problem, batch, name="prebuild")["wall_s"]
        service = run_service(args, work, problem, batch)
        suite = run_suite(args, work, problem, run_batch)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    same = service.pop("verdicts") == suite["verdicts"]
    kinds = [kind for kind, _ in batch]
    figures = {
        "samples": args.samples,
        "mix": {k: kinds.count(k) for k in ("honest", "wrong", "hacked")},
        "device": args.device,
        "devices": args.devices or args.device,
        "workers_per_device": args.workers_per_device or "default",
        "eval_args": args.eval_args,
        "cold": args.cold,
        "prebuilt_s": prebuilt_s,
        "serve": service,
        "run": {k: v for k, v in suite.items() if k != "verdicts"},
        "verdicts": {v: suite["verdicts"].count(v) for v in sorted(set(suite["verdicts"]))},
        "verdicts_identical": same,
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
