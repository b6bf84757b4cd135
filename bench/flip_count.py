#!/usr/bin/env python3
"""How often a verdict flips between runs with fresh secret seeds, and how close each came.

Issue 19's target: over 10 runs, every honest file (the bundled examples, the honest zoo) gives
the same verdict every time, and every hack of the zoo is caught every time. Each run evaluates
every selected file once with `kbv eval --json` (a fresh secret seed each time: kbv draws one per
evaluation), and one JSON line per (run, file) goes to OUT/runs.jsonl as it finishes, so an
interrupted count resumes. The summary (OUT/flips.md) gives per file the verdicts seen, whether
they agree with what is expected, the number of flips, and the largest margins (error over
budget, elementwise and normwise: docs/protocol.md) over the runs.

    python3 bench/flip_count.py --runs 10 --device cpu --out flips-cpu [--jobs 2] [--only REGEX]
        [--timing]   # default: correctness only (--no-timing); hacks caught at timing need it

Files: the zoo (examples/zoo.json) where its `gpu_device` (or `cpu` for --device cpu) matches,
and the bundled honest candidates (examples/candidates/<device>/...), each against its problem.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import zoo_table  # noqa: E402


def selected(device: str, only: str) -> list[dict]:
    """(file, problem, expected entry) of every file this count covers."""
    files = []
    for rel, entry in zoo_table.manifest().items():
        path = zoo_table.EXAMPLES / rel
        if not path.exists():
            continue
        # On the GPU machine each file runs where the zoo runs it (gpu_device: a C++ loop over
        # host memory stays on the CPU); on the CPU every file but the CUDA-only ones.
        if device == "cuda" and entry.get("gpu_device", "cuda") != "cuda":
            continue
        if device == "cpu" and entry.get("cuda_only"):
            continue
        problem = REPO / "problems" / (zoo_table.target_of(path) + ".py")
        files.append(
            {"file": f"zoo/{rel}", "path": str(path), "problem": str(problem), "expected": entry}
        )
    for path in sorted((REPO / "examples" / "candidates" / device).rglob("*.py")):
        level = path.parent.name
        problem = REPO / "problems" / level / path.name
        if problem.exists():
            rel = path.relative_to(REPO / "examples").as_posix()
            files.append(
                {
                    "file": rel,
                    "path": str(path),
                    "problem": str(problem),
                    "expected": {"verdict": "correct", "flags": []},
                }
            )
    return [f for f in files if re.search(only, f["file"])]


def margins_of(result: dict) -> dict:
    """The largest margins of the result's families, and the family each came from."""
    out = {}
    for name, family in (result.get("correctness") or {}).items():
        for kind, value in (family.get("margins") or {}).items():
            if isinstance(value, (int, float)) and value > out.get(kind, (-1.0, ""))[0]:
                out[kind] = (value, name)
    return {k: {"value": v, "family": f} for k, (v, f) in out.items()}


def budgets_of(result: dict) -> dict:
    """How the result's judged outputs were budgeted: `floor` (within the floor, the
    sensitivity never measured, so the elementwise margin is against the floor, an upper bound
    of the margin against the full budget), `full` (the sensitivity in the budget, measured at
    the draw or for this output), `other` (an output that changed while it was judged, or a
    pass with no sensitivity: allclose protocols, integer outputs). Matches audit_table.cpp."""
    counts = collections.Counter()
    for family in (result.get("correctness") or {}).values():
        for case in family.get("cases") or []:
            for output in case.get("outputs") or []:
                budget = output.get("budget")
                if budget == "floor":
                    counts["floor"] += 1
                elif budget is None or budget.startswith("sensitivity"):
                    counts["full" if "margins" in output else "other"] += 1
                else:
                    counts["other"] += 1
    return dict(counts)


def evaluate(kbv: str, item: dict, device: str, timing: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            kbv,
            "eval",
            "--problem",
            item["problem"],
            "--candidate",
            item["path"],
            "--device",
            device,
            "--quiet",
            "--json",
            str(out),
        ]
        if not timing:
            cmd.append("--no-timing")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as error:
            # Not a verdict (kbv could not be started, or hung): left out of the flips, listed.
            return {
                "verdict": "no_result",
                "reason": f"{type(error).__name__}: {error}"[:300],
                "as_expected": False,
                "flags": [],
                "margins": {},
            }
        if not out.exists():
            return {
                "verdict": "no_result",
                "reason": (proc.stderr or proc.stdout)[-300:],
                "as_expected": False,
                "flags": [],
                "margins": {},
            }
        result = json.loads(out.read_text())
    judged_ok, _, flags = zoo_table.judge(item["expected"], result)
    return {
        "verdict": result.get("verdict"),
        "reason": result.get("reason", "")[:300],
        "as_expected": judged_ok,
        "flags": flags,
        "margins": margins_of(result),
        "budgets": budgets_of(result),
        "seed_sha256": result.get("environment", {}).get("seed_sha256"),
    }


def summarize(rows: list[dict], files: list[dict]) -> str:
    by_file = collections.defaultdict(list)
    for r in rows:
        by_file[r["file"]].append(r)
    lines = [
        "| file | runs | verdicts | as expected | flips | largest elementwise margin | "
        "largest normwise margin |",
        "|---|---|---|---|---|---|---|",
    ]
    flips_total = unexpected = 0
    for f in files:
        runs = by_file.get(f["file"], [])
        if not runs:
            continue
        verdicts = collections.Counter(r["verdict"] for r in runs)
        judged = collections.Counter(r["verdict"] for r in runs if r["verdict"] != "no_result")
        flips = sum(judged.values()) - max(judged.values(), default=0)
        missed = sum(1 for r in runs if not r.get("as_expected", False))
        flips_total += flips
        unexpected += missed

        def largest(kind: str, runs: list[dict] = runs) -> str:
            seen = [r["margins"][kind] for r in runs if kind in r["margins"]]
            if not seen:
                return "-"
            top = max(seen, key=lambda m: m["value"])
            return f"{top['value']:.3g} ({top['family']})"

        lines.append(
            f"| `{f['file']}` | {len(runs)} | "
            + ", ".join(f"{v} {n}" for v, n in verdicts.most_common())
            + f" | {len(runs) - missed}/{len(runs)} | {flips} | {largest('elementwise')} | "
            f"{largest('normwise')} |"
        )
    lines.append("")
    lines.append(
        f"{len(by_file)} files, {len(rows)} evaluations: {flips_total} flips, "
        f"{unexpected} evaluations not as expected."
    )
    budgets = collections.Counter()
    for r in rows:
        budgets.update(r.get("budgets") or {})
    if budgets:
        lines.append(
            f"Judged outputs: {budgets['floor']} within the floor (their elementwise margins are "
            f"against the floor, an upper bound), {budgets['full']} against the full budget, "
            f"{budgets['other']} otherwise."
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default=".")
    parser.add_argument("--timing", action="store_true")
    args = parser.parse_args()
    kbv = os.environ.get("KBV_BIN", str(REPO / "build" / "kbv"))
    files = selected(args.device, args.only)
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "runs.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    # What kbv could not evaluate (no_result) is tried again: it is not a verdict.
    rows = [r for r in rows if r["verdict"] != "no_result"]
    done = {(r["run"], r["file"]) for r in rows}
    todo = [(run, f) for run in range(args.runs) for f in files if (run, f["file"]) not in done]
    print(f"{len(files)} files x {args.runs} runs: {len(todo)} evaluations to go", file=sys.stderr)
    lock = threading.Lock()

    def one(run: int, item: dict) -> None:
        row = {"run": run, "file": item["file"], **evaluate(kbv, item, args.device, args.timing)}
        with lock:
            rows.append(row)
            with log.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(f"[{len(rows)}] run {run} {item['file']}: {row['verdict']}", file=sys.stderr)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for future in [pool.submit(one, run, f) for run, f in todo]:
            future.result()
    table = summarize(rows, files)
    (args.out / "flips.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
