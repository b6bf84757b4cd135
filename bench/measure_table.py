"""The Markdown tables of bench/gpu_measure.sh's results: python3 bench/measure_table.py DIR

Repeatability: per problem, the speedup of run A and run B (kbv headline, the engine's timing)
and of KernelBench's method in its two passes; the median absolute relative change between the
two for each (target: kbv at most 1% and at most half of KernelBench's)."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def key_of(level, problem_id) -> tuple[int, int] | None:
    try:
        return int(level), int(problem_id)
    except (TypeError, ValueError):
        return None


def rel_key(rel: str) -> tuple[int, int] | None:
    m = re.match(r"level(\d+)/(\d+)_", rel)
    return (int(m[1]), int(m[2])) if m else None


def kbv_speedups(rows: list[dict]) -> dict[tuple[int, int], dict]:
    out = {}
    for r in rows:
        row = r.get("_row", {})
        key = key_of(row.get("level"), row.get("problem_id"))
        sp = r.get("speedup") or {}
        headline = sp.get("headline")
        if key is None or not headline or headline not in sp:
            continue
        out[key] = {
            "name": row.get("problem", ""),
            "headline": sp[headline].get("value"),
            "vs_fp32": sp.get("vs_fp32", {}).get("value"),
            "tie": sp[headline].get("tie"),
            "timing": r.get("timing", {}),
            "durations": r.get("durations_s", {}),
        }
    return out


def kb_speedups(data) -> dict[tuple[int, int], float]:
    out = {}
    for rel, row in (data or {}).get("problems", {}).items():
        key = rel_key(rel)
        if key and "speedup" in row:
            out[key] = row["speedup"]
    return out


def change(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(b - a) / a


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def fmt(x, digits=3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def repeatability(d: Path) -> list[str]:
    a, b = kbv_speedups(jsonl(d / "run_a.jsonl")), kbv_speedups(jsonl(d / "run_b.jsonl"))
    k1 = kb_speedups(load(d / "kernelbench_1.json"))
    k2 = kb_speedups(load(d / "kernelbench_2.json"))
    keys = sorted(set(a) | set(b) | set(k1) | set(k2))
    lines = [
        "## Repeatability (two separate runs)",
        "",
        "| problem | kbv A | kbv B | kbv change | KernelBench 1 | KernelBench 2 | KB change |"
        " stop (A) | samples/side (A) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    kbv_changes, kb_changes = [], []
    for key in keys:
        ra, rb = a.get(key, {}), b.get(key, {})
        ck = change(ra.get("headline"), rb.get("headline"))
        cb = change(k1.get(key), k2.get(key))
        if ck is not None:
            kbv_changes.append(ck)
        if cb is not None:
            kb_changes.append(cb)
        t = ra.get("timing", {})
        lines.append(
            f"| {ra.get('name') or rb.get('name') or key} | {fmt(ra.get('headline'))} | "
            f"{fmt(rb.get('headline'))} | {pct(ck)} | {fmt(k1.get(key))} | {fmt(k2.get(key))} | "
            f"{pct(cb)} | {t.get('stop_reason', '—')} | {t.get('candidate', {}).get('n', '—')} |"
        )
    mk = statistics.median(kbv_changes) if kbv_changes else None
    mb = statistics.median(kb_changes) if kb_changes else None
    lines += [
        "",
        f"- **Median absolute change of speedup, kbv (headline):** {pct(mk)} over "
        f"{len(kbv_changes)} problems",
        f"- **Same for KernelBench's method (events, 100 trials, mean):** {pct(mb)} over "
        f"{len(kb_changes)} problems",
    ]
    if mk is not None and mb is not None:
        ok = mk <= 0.01 and mk <= mb / 2
        verdict = "met" if ok else "not met"
        lines.append(f"- Target (kbv <= 1% and <= half of KernelBench's): **{verdict}**")
    # Throttling and secondary figures from run A.
    lines += [
        "",
        "### Run A: clocks, secondary figures, kernel audit (candidate side)",
        "",
        "| problem | headline ms | host-inclusive ms | hot ms | kernel span / event | SM MHz"
        " (min-max) | power-capped | discarded |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(a):
        c = a[key]["timing"].get("candidate", {})
        th = c.get("throttle", {})
        clk = th.get("sm_clock_mhz") or {}
        audit = c.get("kernel_audit", {})
        lines.append(
            f"| {a[key]['name']} | {fmt(c.get('median_ms'), 4)} | "
            f"{fmt(c.get('host_inclusive', {}).get('median_ms'), 4)} | "
            f"{fmt(c.get('hot', {}).get('median_ms'), 4)} | {fmt(audit.get('span_over_event'))} | "
            f"{fmt(clk.get('min'), 0) + '-' + fmt(clk.get('max'), 0) if clk else '—'} | "
            f"{th.get('power_capped', '—')} | "
            f"{th.get('discarded', '—')} |"
        )
    return lines


def memory(d: Path) -> list[str]:
    data = load(d / "memory_planted.json")
    lines = ["## Memory: planted allocations", ""]
    if not data:
        return lines + ["(no results)"]
    lines += [
        "| path | planted MiB | reported MiB | error MiB | within 1 MiB | v1 fallback MiB |"
        " method | by source (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in data["paths"]:
        if "error" in row:
            lines.append(f"| {row['path']} | error: {row['error']} |||||||")
            continue
        src = ", ".join(f"{k} {v:.1f}" for k, v in row.get("bytes_by_source_mib", {}).items())
        lines.append(
            f"| {row['path']} | {row['planted_mib']:.2f} | {row['reported_mib']:.2f} | "
            f"{row['error_mib']:+.2f} | {'yes' if row['within_1_mib'] else 'NO'} | "
            f"{row['fallback_reported_mib']:.2f} | {row['method']}"
            f"{' (partial: ' + row['why_partial'] + ')' if row.get('partial') else ''} | {src} |"
        )
    return lines


def accuracy(d: Path) -> list[str]:
    lines = ["## Accuracy", ""]
    launch = load(d / "accuracy_launch.json")
    if launch:
        lines += [
            f"- {launch['op']}: headline **{launch['headline_median_us']:.2f} us** "
            f"({launch['headline_method']}); host-inclusive "
            f"{launch['host_inclusive_median_us']:.2f} us; hot back-to-back "
            f"{launch['hot_median_us']:.2f} us; KernelBench's method "
            f"{launch['kernelbench_mean_us']:.2f} us",
        ]
    ncu = load(d / "accuracy_ncu.json")
    if ncu and "skipped" in ncu:
        lines.append(f"- Nsight Compute: skipped ({ncu['skipped']})")
    elif ncu:
        lines += [
            "",
            "| problem | kernels/call | ncu gpu__time_duration ms | kbv headline ms | difference |",
            "|---|---|---|---|---|",
        ]
        for rel, row in ncu.items():
            if rel.startswith("_"):
                continue
            if "error" in row:
                lines.append(f"| {rel} | {row['error']} ||||")
                continue
            lines.append(
                f"| {rel} | {row['kernels_per_call']} | {row['ncu_gpu_time_ms']:.4f} | "
                f"{row['headline_ms']:.4f} | {100 * row['relative_difference']:+.1f}% |"
            )
    return lines


def main() -> None:
    d = Path(sys.argv[1])
    out = ["# Measurement engine benchmarks", ""]
    for name in ("started.txt", "finished.txt"):
        if (d / name).exists():
            out.append(f"- {name[:-4]}: {(d / name).read_text().strip()}")
    if (d / "gpu.csv").exists():
        out.append(f"- GPU: `{(d / 'gpu.csv').read_text().strip().splitlines()[-1]}`")
    out.append("")
    for part in (repeatability, memory, accuracy):
        try:
            out += part(d) + [""]
        except Exception as error:  # noqa: BLE001 - one broken part must not hide the rest
            out += [f"({part.__name__}: {type(error).__name__}: {error})", ""]
    if (d / "harness_cost.md").exists():
        out += ["## Harness cost (run A, seconds per evaluated candidate)", ""]
        out += [(d / "harness_cost.md").read_text()]
    if (d / "steps.txt").exists():
        out += ["## Steps", "", "```", (d / "steps.txt").read_text().strip(), "```"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
