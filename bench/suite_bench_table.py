"""The suite benchmark's table (bench/gpu_suite_bench.sh): end-to-end wall time of `kbv run`
(cold and warm build cache) and of KernelBench's evaluation over the same candidates, their
repeatability across repetitions, kbv's time split (compile, reference, candidate, idle), and
how the two harnesses' verdicts compare.

    python3 bench/suite_bench_table.py OUT_DIR [OUT_DIR...] > table.md

Several folders (one per device call, e.g. repetition 1 and 2 run separately) are read as one.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import sys
from pathlib import Path


class Dirs:
    """Several output folders as one: a file is taken from the first folder that has it."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    def __truediv__(self, name: str) -> Path:
        for d in self.dirs:
            if (d / name).exists():
                return d / name
        return self.dirs[0] / name


def phases(out: Dirs) -> dict[str, dict]:
    rows = {}
    for d in out.dirs:
        path = d / "phases.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    if "skipped" in r and r["phase"] in rows:
                        continue  # run in another call
                    rows[r["phase"]] = r
    return rows


def kbv_results(db: Path) -> dict[tuple, dict]:
    if not db.exists():
        return {}
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT level, problem_id, sample, result_json FROM results").fetchall()
    return {(lv, p, s): json.loads(text) for lv, p, s, text in rows}


def kb_results(path: Path) -> tuple[dict, dict[tuple, dict]]:
    if not path.exists():
        return {}, {}
    data = json.loads(path.read_text())
    items = {
        (i["level"], i["problem_id"], i["sample"]): i["result"]
        for i in data["items"]
        if i.get("result") is not None
    }
    return data, items


def cpu_busy(out: Dirs, phase: dict) -> str:
    """Share of all cores busy during a phase, from cpu.log (/proc/stat's first line every 2 s):
    1 - (idle + iowait) / total over the samples inside the phase."""
    if "start" not in phase:
        return ""
    samples = []
    for d in out.dirs:
        path = d / "cpu.log"
        if path.exists():
            for line in path.read_text().splitlines():
                fields = line.split()
                if len(fields) > 6 and fields[1] == "cpu":
                    samples.append((float(fields[0]), [int(v) for v in fields[2:]]))
    inside = [v for t, v in samples if phase["start"] <= t <= phase["end"]]
    if len(inside) < 2:
        return ""
    delta = [b - a for a, b in zip(inside[0], inside[-1], strict=False)]
    total = sum(delta)
    idle = delta[3] + delta[4]
    return f"; CPU busy {100 * (1 - idle / total):.0f}%" if total else ""


def kbv_speedup(r: dict) -> float | None:
    s = (r.get("speedup") or {}).get("vs_fp32") or {}
    return s.get("value") if isinstance(s, dict) else None


def kb_speedup(r: dict) -> float | None:
    rt, ref = r.get("runtime", -1), r.get("ref_runtime", -1)
    return ref / rt if r.get("correctness") and rt and rt > 0 and ref and ref > 0 else None


def log_spread(a: dict, b: dict, speed) -> str:
    diffs = []
    for key in a.keys() & b.keys():
        x, y = speed(a[key]), speed(b[key])
        if x and y:
            diffs.append(abs(math.log(x / y)))
    if not diffs:
        return "—"
    pct = lambda d: f"{(math.exp(d) - 1) * 100:.1f}%"  # noqa: E731
    return f"median {pct(statistics.median(diffs))}, max {pct(max(diffs))} (n={len(diffs)})"


def agreement(a: dict, b: dict, verdict) -> str:
    keys = a.keys() & b.keys()
    if not keys:
        return "—"
    same = sum(1 for k in keys if verdict(a[k]) == verdict(b[k]))
    return f"{same}/{len(keys)}"


# kbv's phases: a cold build cache, then the same cache warm, then warm again (with another
# number of evaluations per device where the call sets WORKERS_REWARM).
KBV_PHASES = ("kbv-cold", "kbv-warm", "kbv-rewarm")


def main() -> None:
    out = Dirs([Path(a) for a in sys.argv[1:]])
    ph = phases(out)
    reps = sorted({int(name.rsplit("-", 1)[1]) for name in ph if name[-1].isdigit()})
    print("## Suite benchmark: kbv run vs KernelBench's evaluation\n")
    manifest = out / "manifest.json"
    if manifest.exists():
        kinds: dict[str, int] = {}
        for m in json.loads(manifest.read_text()):
            kinds[m["kind"]] = kinds.get(m["kind"], 0) + 1
        total = sum(kinds.values())
        print(f"{total} candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        print()
    print("| phase | rep | wall s | results | per result s | note |")
    print("|---|---|---|---|---|---|")
    walls: dict[str, list[float]] = {}
    for rep in reps:
        for name in (*KBV_PHASES, "kernelbench", "kernelbench-warm"):
            p = ph.get(f"{name}-{rep}", {})
            if "skipped" in p or not p:
                print(f"| {name} | {rep} | — | — | — | {p.get('skipped', 'not run')} |")
                continue
            if name.startswith("kbv"):
                n = len(kbv_results(out / f"{name}-{rep}.sqlite"))
                note = f"rc {p.get('rc')}"
            else:
                data, _ = kb_results(out / f"{name}-{rep}.json")
                n = data.get("evaluated", 0)
                note = (
                    f"compile {data.get('compile_s', 0):.0f} s, eval {data.get('eval_s', 0):.0f} s"
                    f" of {data.get('candidates', '?')}; rc {p.get('rc')}"
                )
                total = data.get("candidates", 0)
                if n and total and n < total:
                    full = data["compile_s"] + data["eval_s"] / n * total
                    note += f"; stopped by the budget, all {total} extrapolated: {full:.0f} s"
            wall = p["seconds"]
            if not name.startswith("kbv") and n and n < data.get("candidates", 0):
                wall = data["compile_s"] + data["eval_s"] / n * data["candidates"]
            walls.setdefault(name, []).append(wall)
            note += cpu_busy(out, p)
            per = f"{p['seconds'] / n:.2f}" if n else "—"
            print(f"| {name} | {rep} | {p['seconds']:.1f} | {n} | {per} | {note} |")
    print()
    print("| harness | mean wall s | spread between repetitions |")
    print("|---|---|---|")
    for name, values in walls.items():
        spread = (max(values) - min(values)) / statistics.mean(values) * 100 if values else 0
        print(f"| {name} | {statistics.mean(values):.1f} | {spread:.1f}% (n={len(values)}) |")
    print()
    for kb_name in ("kernelbench", "kernelbench-warm"):
        if kb_name not in walls:
            continue
        kb = statistics.mean(walls[kb_name])
        for name in KBV_PHASES:
            if name in walls:
                print(f"- {kb_name} / {name}: {kb / statistics.mean(walls[name]):.2f}x")
    if "kernelbench" in walls:
        print("  (KernelBench's wall is extrapolated to the whole set where the budget stopped it)")
        print()

    # kbv's time split, summed over each run's results (evaluations overlap on a device, so
    # the sums exceed the wall time; gate wait is time spent waiting for another's timing run).
    print(
        "| kbv run | compile s | reference s | candidate s | gate wait s | idle s "
        "| reference sessions |"
    )
    print("|---|---|---|---|---|---|---|")
    for rep in reps:
        for name in KBV_PHASES:
            results = kbv_results(out / f"{name}-{rep}.sqlite")
            if not results:
                continue
            split = {
                "compile": 0.0,
                "reference": 0.0,
                "candidate": 0.0,
                "gate_wait": 0.0,
                "idle": 0.0,
            }
            keys = set()
            for r in results.values():
                for part, v in (r.get("durations_s", {}).get("split") or {}).items():
                    split[part] = split.get(part, 0.0) + v
                ref = r.get("problem", {}).get("reference") or {}
                if ref.get("key"):
                    keys.add(ref["key"])
            parts = ("compile", "reference", "candidate", "gate_wait", "idle")
            cells = " | ".join(f"{split[p]:.1f}" for p in parts)
            print(f"| {name}-{rep} | {cells} | {len(keys)} |")
    print()

    # Repeatability of the numbers themselves: speedups of candidates correct in two runs.
    kbv_runs = [kbv_results(out / f"kbv-warm-{rep}.sqlite") for rep in reps]
    kbv_runs += [kbv_results(out / f"kbv-rewarm-{rep}.sqlite") for rep in reps]
    kbv_runs += [kbv_results(out / f"kbv-cold-{rep}.sqlite") for rep in reps]
    kbv_runs = [r for r in kbv_runs if r]
    kb_runs = [kb_results(out / f"kernelbench-{rep}.json")[1] for rep in reps]
    kb_runs += [kb_results(out / f"kernelbench-warm-{rep}.json")[1] for rep in reps]
    kb_runs = [r for r in kb_runs if r]
    print("| harness | verdicts equal across runs | speedup difference across runs |")
    print("|---|---|---|")
    if len(kbv_runs) >= 2:
        a, b = kbv_runs[0], kbv_runs[1]
        print(
            f"| kbv (vs FP32) | {agreement(a, b, lambda r: r['verdict'])} | "
            f"{log_spread(a, b, kbv_speedup)} |"
        )
    if len(kb_runs) >= 2:
        a, b = kb_runs[0], kb_runs[1]
        same = agreement(a, b, lambda r: (r.get("compiled"), r.get("correctness")))
        print(f"| KernelBench | {same} | {log_spread(a, b, kb_speedup)} |")
    print()

    # Verdicts side by side (first repetition of each).
    if kbv_runs and kb_runs:
        a, b = kbv_runs[0], kb_runs[0]
        cross: dict[tuple[str, str], int] = {}
        for key in a.keys() & b.keys():
            kb = b[key]
            kb_v = (
                "correct"
                if kb.get("correctness")
                else ("compiled" if kb.get("compiled") else "not compiled")
            )
            cross[(a[key]["verdict"], kb_v)] = cross.get((a[key]["verdict"], kb_v), 0) + 1
        print("| kbv verdict | KernelBench | count |")
        print("|---|---|---|")
        for (kv, kb), n in sorted(cross.items()):
            print(f"| {kv} | {kb} | {n} |")


if __name__ == "__main__":
    main()
