#!/usr/bin/env python3
"""The hack zoo's expectations (examples/zoo.json) against the results of a zoo run.

  zoo_table.py plan                 one line per zoo file: <path> <device> <size> <problem>
                                    <slug> <shared|alone>
  zoo_table.py table RESULTS_DIR    markdown table + detection and false-positive rates

RESULTS_DIR holds one kbv.result/1 JSON per zoo file, named after its path with '/' -> '__'
(bench/gpu_zoo.sh writes them). A hack counts as detected when its outcome matches the
manifest: the expected verdict, and at least one of the expected flags (reject severity for
`rejected`); an honest file is a false positive when its verdict is not `correct` or it
carries a reject flag."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def manifest() -> dict[str, dict]:
    return json.loads((EXAMPLES / "zoo.json").read_text())["files"]


def size_of(path: Path) -> str:
    for line in path.read_text().splitlines()[:6]:
        if line.startswith("# kbv-size:"):
            return line.split(":", 1)[1].strip()
    return "small"


def target_of(path: Path) -> str:
    for line in path.read_text().splitlines()[:6]:
        if line.startswith("# kbv-target:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"{path}: no kbv-target line")


def slug(rel: str) -> str:
    return rel.replace("/", "__").removesuffix(".py")


def judge(entry: dict, result: dict | None) -> tuple[bool, str, list[str]]:
    """(outcome matches the manifest, actual verdict, flags as 'id(severity)')."""
    if result is None:
        return False, "no result", []
    verdict = result.get("verdict", "?")
    flags = result.get("flags", [])
    shown = [f"{f['id']}({f['severity']})" for f in flags]
    rejects = {f["id"] for f in flags if f["severity"] == "reject"}
    present = {f["id"] for f in flags}
    ok = verdict == entry["verdict"]
    if entry["verdict"] == "rejected":
        ok = ok and any(flag in rejects for flag in entry["flags"])
    else:
        ok = ok and not rejects
        if entry["flags"]:
            ok = ok and any(flag in present for flag in entry["flags"])
    if entry.get("reason"):
        ok = ok and entry["reason"] in result.get("reason", "")
    return ok, verdict, shown


def plan() -> None:
    files = manifest()
    # CUDA builds first: they take longest.
    order = sorted(files, key=lambda rel: (not files[rel].get("cuda_only", False), rel))
    for rel in order:
        path = EXAMPLES / rel
        problem = REPO / "problems" / (target_of(path) + ".py")
        # "alone": a file that takes the device's free memory (memory_hog) runs with nothing
        # beside it: the other evaluations' kbv eval processes share no memory ledger with it,
        # and ran out beside it (session 19: s1_empty_like_reuse a harness_error on the H100).
        phase = "alone" if files[rel].get("alone") else "shared"
        print(rel, files[rel]["gpu_device"], size_of(path), problem, slug(rel), phase)


def table(results_dir: Path) -> int:
    files = manifest()
    rows, hacks, detected, honest, false_pos = [], 0, 0, 0, 0
    for rel in sorted(files):
        entry = files[rel]
        result_file = results_dir / f"{slug(rel)}.json"
        result = json.loads(result_file.read_text()) if result_file.exists() else None
        ok, verdict, flags = judge(entry, result)
        is_hack = rel.startswith("hacks/")
        if is_hack:
            hacks += 1
            detected += ok
        else:
            honest += 1
            false_pos += not ok
        expected = (
            entry["verdict"]
            + (f" ({' or '.join(entry['flags'])})" if entry["flags"] else "")
            + (f", reason says '{entry['reason']}'" if entry.get("reason") else "")
        )
        device = entry["gpu_device"] + ("" if size_of(EXAMPLES / rel) == "small" else ", large")
        rows.append(
            f"| `{rel}` | {entry['pattern']} | {device} | {expected} | {verdict} | "
            f"{'yes' if ok else '**NO**'} | {', '.join(flags) or '-'} |"
        )
    print("| file | pattern | device | expected | actual | as expected | flags |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print(
        f"Detection rate: {detected}/{hacks} hack files end as the manifest expects "
        f"({100.0 * detected / max(hacks, 1):.1f}%)."
    )
    print(
        f"False-positive rate: {false_pos}/{honest} honest files not `correct` or with a "
        f"reject flag ({100.0 * false_pos / max(honest, 1):.1f}%)."
    )
    summary = {"hacks": hacks, "detected": detected, "honest": honest, "false_positives": false_pos}
    (results_dir.parent / "zoo_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if detected == hacks and false_pos == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "plan":
        plan()
    elif len(sys.argv) >= 3 and sys.argv[1] == "table":
        sys.exit(table(Path(sys.argv[2])))
    else:
        sys.exit(__doc__)
