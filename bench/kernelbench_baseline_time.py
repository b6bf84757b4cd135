"""KernelBench's own baseline timing of its problems, as `scripts/generate_baseline_time.py`
drives it for the eager baseline: `kernelbench.timing.measure_ref_program_time` on every
problem of a level (eager PyTorch, fp32, its defaults: 5 warm-ups, 100 trials, CUDA events,
seed 42), one problem after another in one process. The wall time of the whole pass is the
yardstick issue 18 sets `kbv audit` against (at most 2x it). Results stream to a JSON Lines
file, one problem a line, and a rerun skips the problems already there.

KernelBench's code is never copied here: point KBV_KERNELBENCH at a checkout (default
.deps/KernelBench; its `src/` and the `KernelBench/levelN` or `levelN` problem folders).

    KBV_KERNELBENCH=.kb python3 bench/kernelbench_baseline_time.py --levels 1 2 3 \\
        --out kb_baseline.jsonl [--time-budget S] [--only 19_ReLU ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernelbench_eval  # noqa: E402  (sets up KernelBench's path and its stand-ins)


def problem_files(root: Path, level: int) -> list[Path]:
    for folder in (root / "KernelBench" / f"level{level}", root / f"level{level}"):
        if folder.is_dir():
            files = [p for p in folder.glob("*.py") if re.match(r"\d+_", p.name)]
            return sorted(files, key=lambda p: int(p.name.split("_")[0]))
    raise SystemExit(f"no level{level} folder under {root}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--time-budget", type=float, default=0, help="stop after this many s")
    parser.add_argument("--only", nargs="*", default=[], help="problem file stems")
    args = parser.parse_args()

    import torch

    kernelbench_eval.load_kernelbench_eval()  # the package, or its __init__ skipped (recorded)
    from kernelbench.timing import measure_ref_program_time

    root = Path(kernelbench_eval.PATHS["kernelbench"])
    done = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            done.add((row["level"], row["problem"]))
    started = time.monotonic()
    with args.out.open("a") as out:
        for level in args.levels:
            for path in problem_files(root, level):
                if args.only and path.stem not in args.only:
                    continue
                if (level, path.stem) in done:
                    continue
                if args.time_budget and time.monotonic() - started > args.time_budget:
                    print("time budget reached", file=sys.stderr)
                    return
                t = time.monotonic()
                row = {"level": level, "problem": path.stem}
                try:
                    row["stats"] = measure_ref_program_time(
                        ref_arch_name=path.stem,
                        ref_arch_src=path.read_text(),
                        use_torch_compile=False,
                        device=torch.device("cuda:0"),
                        precision="fp32",
                    )
                except Exception as error:  # noqa: BLE001 - recorded, the pass goes on
                    row["error"] = f"{type(error).__name__}: {str(error)[:300]}"
                row["wall_s"] = time.monotonic() - t
                out.write(json.dumps(row) + "\n")
                out.flush()
                torch.cuda.empty_cache()
                print(f"level{level}/{path.stem}: {row['wall_s']:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
