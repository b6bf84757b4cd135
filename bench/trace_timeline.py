"""Where a run's wall time went, from its call trace (KBV_TRACE_CALLS): the calls laid on a grid,
how long nothing but worker loads was in flight (an evaluation waiting for a worker's start or a
model's construction), how long timing runs held the device, how many calls were in flight the
rest of the time, and what the loads' steps took (`load_phases_s`, since session 24). An
evaluation's waits for its device (role `harness`: `wait_gate`, `wait_memory`, `wait_ahead`,
since session 25; `wait_load`, a device thread awaiting a problem's load before placing its
task, since session 26) are not calls: they are summed apart, and the time with no call in
flight is split by the waits in flight then.

    python3 bench/trace_timeline.py trace.jsonl[.gz] [--resolution 0.1] [--gap 3] [--list-gaps]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
from pathlib import Path

LOADS = {"load_problem", "load_candidate"}
TIMING = {"time", "time_secondary", "prepare_timing_sets"}


def read(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("--resolution", type=float, default=0.1, help="grid step, seconds")
    parser.add_argument("--gap", type=float, default=3.0, help="loads-only gaps at least this")
    parser.add_argument("--top", type=int, default=12, help="problems listed by their time")
    parser.add_argument(
        "--list-gaps", action="store_true", help="each loads-only gap: when, and what loaded"
    )
    args = parser.parse_args()
    lines = read(args.trace)
    calls = [c for c in lines if c.get("role") != "harness"]
    waits = [c for c in lines if c.get("role") == "harness"]
    if not calls:
        raise SystemExit(f"{args.trace}: no calls")
    start = min(c["t"] for c in calls)
    end = max(c["t"] + c["s"] for c in calls)
    cells = int((end - start) / args.resolution) + 1
    work = [0] * cells  # calls in flight other than loads
    loads = [0] * cells
    timing = [False] * cells
    waiting: list[set[str]] = [set() for _ in range(cells)]  # the kinds of wait in flight
    for c in waits:
        first = max(0, int((c["t"] - start) / args.resolution))
        last = min(cells, int((c["t"] + c["s"] - start) / args.resolution) + 1)
        # A timing run's wait for the gate (exclusive) holds every other evaluation back.
        exclusive = c["cmd"] == "wait_gate" and (c.get("detail") or {}).get("exclusive")
        for k in range(first, last):
            waiting[k].add("wait_gate (a timing run)" if exclusive else c["cmd"])
    for c in calls:
        first = int((c["t"] - start) / args.resolution)
        last = min(cells, int((c["t"] + c["s"] - start) / args.resolution) + 1)
        for k in range(first, last):
            if c["cmd"] in LOADS:
                loads[k] += 1
            else:
                work[k] += 1
            if c["cmd"] in TIMING:
                timing[k] = True
    step = args.resolution
    only_loads = [w == 0 and n > 0 for w, n in zip(work, loads, strict=True)]
    gaps, k = [], 0
    while k < cells:
        if only_loads[k]:
            j = k
            while j < cells and only_loads[j]:
                j += 1
            if (j - k) * step >= args.gap:
                gaps.append((k * step, j * step))
            k = j
        else:
            k += 1
    print(f"{len(calls)} calls over {end - start:.0f} s of wall")
    gap_seconds = sum(b - a for a, b in gaps)
    idle = sum(1 for w, n in zip(work, loads, strict=True) if w == n == 0)
    print(f"  nothing but loads in flight: {sum(only_loads) * step:.0f} s")
    print(f"    in {len(gaps)} gaps of {args.gap:g} s or more: {gap_seconds:.0f} s")
    if args.list_gaps:
        list_gaps(gaps, calls, start)
    print(f"  nothing at all in flight: {idle * step:.0f} s")
    print(f"  timing runs: {sum(timing) * step:.0f} s")
    if waits:
        print(f"  waits for the device ({len(waits)}), summed:")
        for command in sorted({c["cmd"] for c in waits}):
            total = sum(c["s"] for c in waits if c["cmd"] == command)
            print(f"    {command}: {total:.0f} s")
        quiet = collections.Counter(
            " and ".join(sorted(w)) or "no wait"
            for w, n in zip(waiting, work, strict=True)
            if n == 0
        )
        split = ", ".join(f"{kind}: {cells_ * step:.0f} s" for kind, cells_ in quiet.most_common())
        print(f"  with no call in flight but loads, by the waits then: {split}")
    spread = collections.Counter(min(w, 5) for w in work)
    shares = [f"{n}{'+' if n == 5 else ''}: {spread[n] * step:.0f} s" for n in range(6)]
    print("  calls in flight besides loads: " + ", ".join(shares))
    for command in sorted(LOADS):
        seconds = sorted(c["s"] for c in calls if c["cmd"] == command)
        if not seconds:
            continue
        p90 = seconds[int(0.9 * (len(seconds) - 1))]
        median = statistics.median(seconds)
        print(f"{command}: {len(seconds)}, median {median:.1f} s, p90 {p90:.1f} s")
        print(f"  sum {sum(seconds):.0f} s")
        steps = collections.defaultdict(list)
        for c in calls:
            if c["cmd"] == command and isinstance(c.get("detail"), dict):
                for name, value in c["detail"].items():
                    if isinstance(value, (int, float)):
                        steps[name].append(value)
        for name, values in sorted(steps.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {name}: median {statistics.median(values):.2f} s, sum {sum(values):.0f} s")
    by_problem(calls, waits, args.top)


def list_gaps(gaps: list[tuple[float, float]], calls: list[dict], start: float) -> None:
    """Each loads-only gap, seconds from the trace's start, with the loads in flight then (r:
    a reference's, c: a candidate's, by file): a drain's reloads show as many files at once, a
    retry's own load as one (session 31's H100 audit)."""
    files = {c["pid"]: c["file"] for c in calls if c.get("file")}
    for first, last in gaps:
        loading = sorted(
            {
                f"{c['role'][0]}:{files.get(c['pid'], '?')}"
                for c in calls
                if c["cmd"] in LOADS and c["t"] - start < last and c["t"] + c["s"] - start > first
            }
        )
        more = f" and {len(loading) - 6} more" if len(loading) > 6 else ""
        shown = ", ".join(loading[:6]) + more
        print(f"      {first:7.1f}-{last:7.1f} s ({last - first:4.1f} s): {shown}")


def by_problem(calls: list[dict], waits: list[dict], top: int) -> None:
    """The problems whose reference worker spent the most time in calls and waits: a load names
    its file (since session 26), which ties the worker's pid, its calls and the waits traced
    under it to a problem."""
    named = {c["pid"]: c["file"] for c in calls if c["cmd"] == "load_problem" and c.get("file")}
    if not named:
        return
    spent: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for c in calls + waits:
        # A load's own wait (wait_load) and a joined preparation's (wait_ahead) overlap the
        # calls they wait for, counted already.
        if c["pid"] in named and c["cmd"] not in LOADS | {"wait_load", "wait_ahead"}:
            if c.get("role") == "harness":
                kind = c["cmd"]
            elif c["cmd"] in TIMING:
                kind = "timing"
            elif c["cmd"] == "prepare_case":
                kind = "draws"
            else:
                kind = "other calls"
            spent[c["pid"]][kind] += c["s"]
            spent[c["pid"]]["all"] += c["s"]
    print(f"problems by their reference's calls and waits (top {top} of {len(named)}):")
    for pid, parts in sorted(spent.items(), key=lambda kv: -kv[1]["all"])[:top]:
        rest = ", ".join(f"{k} {v:.0f}" for k, v in parts.most_common() if k != "all" and v >= 1)
        print(f"  {named[pid]}: {parts['all']:.0f} s ({rest})")


if __name__ == "__main__":
    main()
