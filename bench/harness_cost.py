"""Where the harness's time goes: per evaluated candidate, the wall time of each stage
(reference draws and golden outputs, candidate build and import, correctness, measurement),
read from a `kbv run` database. Usage: python3 bench/harness_cost.py results.sqlite"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys

STAGES = (
    "reference",
    "candidate_load",
    "correctness",
    "rechecks",
    "trace",
    "measurement",
    "timing",
    "memory",
    "total",
)


def main() -> None:
    with sqlite3.connect(sys.argv[1]) as con:
        results = [json.loads(row[0]) for row in con.execute("SELECT result_json FROM results")]
    print(f"{len(results)} results")
    print("| stage | median s | mean s | max s | total s |")
    print("|---|---|---|---|---|")
    for stage in STAGES:
        values = [r["durations_s"].get(stage, 0.0) for r in results]
        if not values:
            continue
        print(
            f"| {stage} | {statistics.median(values):.2f} | {statistics.mean(values):.2f} "
            f"| {max(values):.2f} | {sum(values):.1f} |"
        )
    # Waiting for another evaluation's timing run, by the stage the wait fell in.
    waits: dict[str, float] = {}
    for r in results:
        for stage, seconds in r["durations_s"].get("gate_wait_by_stage", {}).items():
            waits[stage] = waits.get(stage, 0.0) + seconds
    if waits:
        print("\n| gate wait in stage | total s |\n|---|---|")
        for stage, seconds in sorted(waits.items(), key=lambda kv: -kv[1]):
            print(f"| {stage} | {seconds:.1f} |")
    ahead = sum(1 for r in results if r.get("candidate", {}).get("worker_started_ahead"))
    print(f"\nworkers started ahead: {ahead} of {len(results)}")
    # Each problem's first result says whether its reference session was prepared ahead (its
    # problem loaded and cases drawn beside the previous evaluation) and how long it waited.
    firsts = [r["problem"].get("reference", {}) for r in results]
    firsts = [f for f in firsts if f.get("candidate_index") == 1]
    prepared = [f for f in firsts if f.get("prepared_ahead")]
    waited = sum(f.get("ahead_wait_s", 0.0) for f in prepared)
    print(
        f"reference sessions prepared ahead: {len(prepared)} of {len(firsts)} "
        f"(waited for them {waited:.1f} s in all)"
    )


if __name__ == "__main__":
    main()
