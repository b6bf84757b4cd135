#!/usr/bin/env python3
"""What the float64 truth in chunks of rows (python/kbv/row_chunks.py) saves on a problem: one
case drawn by the reference worker's own code, once with the truth in one run
(KBV_TRUTH_CHUNK_BYTES=0) and once at the default chunk, each in a fresh process (no allocator
cache carried over). Per problem and setting: the draw's seconds, its peak (on a GPU torch's peak
allocated, which the memory plan reserves from; on the CPU the process's peak resident set), the
chunks, why a problem ran whole, and whether the two truths agree (normwise difference over a
strided sample of 2^20 elements of each output).

    KBV_NATIVE_DIR=build python3 bench/truth_rows.py --device cuda --out truth_rows.jsonl \
        .kb/level1/19_ReLU.py .kb/level1/30_Softsign.py ...

One JSON line per (problem, setting) in --out, appended as each finishes; a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECRET = "truth-rows-bench"

# Runs in a fresh interpreter: draws native-0 of the problem and writes its figures and truth.
CHILD = r"""
import json, os, resource, sys, time
import torch
sys.path.insert(0, os.environ.get("KBV_NATIVE_DIR", "build"))
import kbv_native  # noqa: F401  (shared arenas)
sys.path.insert(0, sys.argv[4])
from kbv import reference
problem, device, truth_path = sys.argv[1], sys.argv[2], sys.argv[3]
role = reference.ReferenceRole()
role.cmd_load_problem({"device": device, "problem": problem})
role.cmd_set_plan({"cache_bytes": 1 << 62})
started = time.monotonic()
figures = role.cmd_prepare_case(
    {"id": "native-0", "family": "native", "draw": 0, "redraw": [], "secret": sys.argv[5]}
)
seconds = time.monotonic() - started
case = role.cases["native-0"]
# A strided sample of each output (2^20 elements): the truths are compared on it, not written
# whole (a 6 GB problem's float64 truth is 12 GB).
def sample(t):
    flat = t.detach().reshape(-1)
    return flat[:: max(1, flat.numel() // (1 << 20))][: 1 << 20].cpu()
torch.save([sample(t) for t in case.judged], truth_path)
peak = figures["bytes"]["draw_peak"] if device.startswith("cuda") else (
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
print(json.dumps({
    "seconds": seconds, "peak_bytes": peak, "truth": figures["truth"],
    "truth_chunks": figures.get("truth_chunks", 1), "truth_rows": figures.get("truth_rows"),
    "truth_rows_note": figures.get("truth_rows_note"), "input_bytes": figures["bytes"]["inputs"],
}))
"""


def draw(problem: Path, device: str, setting: str, truth_path: str, chunk_bytes: int) -> dict:
    env = dict(os.environ)
    env["KBV_TRUTH_CHUNK_BYTES"] = "0" if setting == "whole" else str(chunk_bytes)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(problem),
            device,
            truth_path,
            str(REPO / "python"),
            SECRET,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def difference(a_path: str, b_path: str) -> float:
    """The larger normwise difference of the two truths' samples, output by output, by the
    probe's own comparison (infinite where non-finite positions or shapes differ)."""
    import torch

    sys.path.insert(0, str(REPO / "python"))
    from kbv.row_chunks import same_rows

    pairs = zip(torch.load(a_path), torch.load(b_path), strict=True)
    differences = [same_rows(x, y) for x, y in pairs]
    return max(float("inf") if d is None else d for d in differences)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--chunk-bytes", type=int, default=1 << 30, help="the chunked setting's budget (kbv's)"
    )
    args = parser.parse_args()
    gib = 1 << 30
    print("| problem | inputs GiB | whole: s, peak GiB | chunks: s, peak GiB | chunks | agree |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for problem in args.problems:
            rows = {}
            for setting in ("whole", "chunks"):
                truth = str(Path(folder) / f"{setting}.pt")
                rows[setting] = draw(problem, args.device, setting, truth, args.chunk_bytes)
                rows[setting]["truth_path"] = truth
                with args.out.open("a") as out:
                    record = {"problem": problem.name, "setting": setting, **rows[setting]}
                    record.pop("truth_path")
                    out.write(json.dumps(record) + "\n")
            w, c = rows["whole"], rows["chunks"]
            if "error" in w or "error" in c:
                print(f"| {problem.name} | | {w.get('error', '')} | {c.get('error', '')} | | |")
                continue
            agree = difference(w["truth_path"], c["truth_path"])
            chunks = str(c["truth_chunks"])
            if c["truth_rows_note"]:
                chunks += f" ({c['truth_rows_note']})"
            print(
                f"| {problem.name} | {w['input_bytes'] / gib:.2f} | {w['seconds']:.2f}, "
                f"{w['peak_bytes'] / gib:.2f} | {c['seconds']:.2f}, {c['peak_bytes'] / gib:.2f} "
                f"| {chunks} | {agree:.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
