"""Session 17: the memory estimate before the first draw, from the reference's forward on the
meta device (kbv.reference `_meta_forward`, the code kbv runs at load), for every KernelBench
level 1-3 problem (.kb: KernelBench 423217d), against the working bytes session 13's H200 audit
measured after each problem's first draw (`problem.reference.plan.working_bytes`).
    python3 docs/results/cpu-2026-12-05-s17/meta_estimates.py > docs/results/cpu-2026-12-05-s17/meta_estimates.txt
Writes meta_estimates.csv beside it. Old rule: 8x inputs + 10x state; new: 3x inputs + 2x the
forward's live peak + 4.5x outputs + 10x state where the meta forward ran (src/eval/memory_plan).
"""

import csv
import glob
import importlib.util
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "python"))
import torch  # noqa: E402

from kbv import families, reference  # noqa: E402

DB = REPO / "docs/results/h200-2026-12-04-s13/call3/audit.sqlite"
LEDGER = 0.5 * 150e9  # the memory ledger's capacity on the H200 (kReservableShare)


def old_rule(s):
    return 8 * s["input_bytes"] + 10 * s["state_bytes"]


def new_rule(s):
    if "forward_peak_bytes" not in s:
        return old_rule(s)
    return (3 * s["input_bytes"] + 2 * s["forward_peak_bytes"] + 4.5 * s["output_bytes"]
            + 10 * s["state_bytes"])  # fmt: skip


def sizes_of(path: str) -> dict:
    spec = importlib.util.spec_from_file_location("problem", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    meta = torch.device("meta")
    template = families.native_inputs(module.get_inputs, families.PUBLIC_SEED, meta)
    role = reference.ReferenceRole()
    role._construction = (module.Model, list(module.get_init_inputs()))
    t = time.monotonic()
    forward = role._meta_forward(template)
    with meta:
        model = module.Model(*module.get_init_inputs())
    state = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    inputs = sum(x.numel() * x.element_size() for x in template if torch.is_tensor(x))
    return {"input_bytes": inputs, "state_bytes": state, "seconds": time.monotonic() - t,
            **forward}  # fmt: skip


def main() -> None:
    measured = {}
    for problem, level, text in sqlite3.connect(DB).execute(
        "SELECT problem, level, result_json FROM results"
    ):
        r = json.loads(text)
        measured[f"level{level}/{problem}"] = (
            r["problem"]["reference"]["plan"]["working_bytes"],
            r["environment"]["protocol_version"],
        )
    rows = []
    for path in sorted(glob.glob(str(REPO / ".kb/level[123]/*.py"))):
        name = path.split(".kb/")[1][:-3]
        try:
            s = sizes_of(path)
        except Exception as error:  # noqa: BLE001 - a problem this machine cannot import
            s = {"forward_estimate": f"not described here: {error}"[:120]}
        w, version = measured.get(name, (None, None))
        rows.append({"problem": name, "protocol": version, "measured": w, **s})
    with open(Path(__file__).with_name("meta_estimates.csv"), "w", newline="") as out:
        fields = ["problem", "protocol", "measured", "input_bytes", "state_bytes", "output_bytes",
                  "forward_peak_bytes", "forward_estimate", "seconds"]  # fmt: skip
        writer = csv.DictWriter(out, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    ran = [r for r in rows if r.get("forward_estimate") == "meta"]
    print(f"{len(rows)} problems; the meta forward ran for {len(ran)}, in at most "
          f"{max(r['seconds'] for r in ran):.2f} s")  # fmt: skip
    for r in rows:
        if r.get("forward_estimate") != "meta":
            print(f"  {r['problem']}: {r.get('forward_estimate')}")
    for version in (1, 2):
        judged = [r for r in rows if "input_bytes" in r and r["protocol"] == version
                  and r["measured"] and r["measured"] > 1e9]  # fmt: skip
        print(f"\nprotocol {version} ({len(judged)} problems measured above 1 GB): "
              "measured / estimate")
        for label, rule in (("8x inputs + 10x state", old_rule), ("with the meta forward", new_rule)):
            ratio = sorted(r["measured"] / max(rule(r), 1.0) for r in judged)
            print(f"  {label:24s} median {statistics.median(ratio):.2f}, "
                  f"p90 {ratio[9 * len(ratio) // 10]:.2f}, max {ratio[-1]:.1f}, "
                  f"above 1.5x: {sum(x > 1.5 for x in ratio)}, below 0.5x: "
                  f"{sum(x < 0.5 for x in ratio)}")  # fmt: skip
    print("\nbefore the first draw, over the ledger's 75 GB (the device alone) / measured after it:")
    for r in rows:
        if "input_bytes" not in r or not r["measured"]:
            continue
        old, new = old_rule(r) > LEDGER, new_rule(r) > LEDGER
        if old or new or r["measured"] > LEDGER:
            print(f"  {r['problem']}: old {old_rule(r) / 1e9:.1f} GB, new {new_rule(r) / 1e9:.1f} "
                  f"GB, measured {r['measured'] / 1e9:.1f} GB (protocol {r['protocol']})")


if __name__ == "__main__":
    main()
