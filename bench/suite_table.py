"""A Markdown table of `kbv eval` results: verdict, speedups with intervals, the TF32/FP32
baseline ratio, peak-memory ratio and flags, one row per JSON result in a directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def interval(s: dict | None) -> str:
    if not s or "value" not in s:
        return "—"
    tie = " (tie)" if s.get("tie") else ""
    return f"{s['value']:.2f}x [{s['ci_low']:.2f}, {s['ci_high']:.2f}]{tie}"


def row(result: dict) -> str:
    timing = result.get("timing") or {}
    tf32 = (timing.get("baseline_tf32") or {}).get("median_ms")
    fp32 = (timing.get("baseline_fp32") or {}).get("median_ms")
    cand = (timing.get("candidate") or {}).get("median_ms")
    ratio = f"{fp32 / tf32:.2f}x" if tf32 and fp32 else "—"
    memory = result.get("memory") or {}
    peak = memory.get("peak_ratio")
    flags = ", ".join(f"{f['id']} ({f['severity']})" for f in result["flags"]) or "—"
    fmt = (lambda v: f"{v:.4f}") if cand is not None else (lambda v: "—")
    return (
        f"| {result['problem'].get('name', '?')} | {result['verdict']} | "
        f"{fmt(cand) if cand is not None else '—'} | {fmt(tf32) if tf32 else '—'} | "
        f"{fmt(fp32) if fp32 else '—'} | {interval(result['speedup'].get('vs_tf32'))} | "
        f"{interval(result['speedup'].get('vs_fp32'))} | {ratio} | "
        f"{f'{peak:.2f}' if isinstance(peak, (int, float)) else '—'} | {flags} |"
    )


def main() -> None:
    directory = Path(sys.argv[1])
    results = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
    print(
        "| problem | verdict | candidate ms | TF32 ms | FP32 ms | vs TF32 | vs FP32 "
        "| FP32/TF32 baseline | peak ratio | flags |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        print(row(result))
    verdicts = [r["verdict"] for r in results]
    print(
        f"\n{len(results)} results: "
        + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
    )


if __name__ == "__main__":
    main()
