#!/usr/bin/env python3
"""Check and time the KernelBench level-1 CUDA candidates on a GPU machine.

For each candidate `examples/kernelbench/level1/<problem>.py` (or those named with --only):
  * import the problem `<--problems DIR>/<problem>.py` and the candidate; build Model and ModelNew
    from get_init_inputs() with torch.manual_seed(42) before each constructor (as KernelBench);
  * inputs, each judged against a float64 run of the reference (`copy.deepcopy(model).double()`
    on `.double()` inputs), with the TF32 baseline's own error beside it:
      - native:  the problem's get_inputs() under seed 42, made directly on the GPU;
      - wide:    randn * 1000 with a few +-1e6 spikes, an all-zero first row and a constant
                 second row (where the first dimension allows), written INTO the native input
                 tensors (same addresses: a candidate that caches by pointer fails here); float
                 parameters are redrawn too (scales c * exp(0.5 N), shifts 0.1 N) and copied
                 into the candidate by name;
      - offset:  sigma * randn + 8 sigma with 5% of the elements negated (a large offset);
  * metrics per input: normwise ||c - t|| / ||t||, max |c - t|, the elementwise ratio
    max |c - t| / (|t| + rms(t)), non-finite mismatches (NaN/Inf positions and kinds), and a
    pass flag with kbv's verified budget (normwise <= max(1e-3, 4 e_ref), elementwise <=
    max(1e-2, 4 worst_ref), non-finite positions equal);
  * timing on the native input: CUDA events, 3 warm-ups then the median of 20, for the candidate
    and for the eager reference with TF32 allowed (the headline baseline) and in plain FP32.
One JSON line per candidate goes to --out (default $OUT/kb_check.jsonl). Each candidate runs in
its own subprocess, so a crash or a sticky CUDA error is recorded and the next one still runs;
memory is released between problems (inputs reach 17 GB). --prebuild N first builds the
extensions N at a time (a shared TORCH_EXTENSIONS_DIR), so the checks reuse the builds.

Usage: gpu_check.py --problems DIR [--cands DIR] [--only 19_ReLU,...] [--out FILE]
                    [--prebuild N] [--deadline SECONDS]
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DEFAULT_CANDS = REPO / "examples" / "kernelbench" / "level1"


def load_module(path: Path, tag: str):
    spec = importlib.util.spec_from_file_location(f"{tag}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def set_tf32(on: bool) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


# ---- metrics
def compare(c, t) -> dict:
    """c: candidate output (float32), t: truth (float64); chunked to bound memory."""
    import torch

    c = c.reshape(-1)
    t = t.reshape(-1)
    n = t.numel()
    chunk = CHUNK
    sum_t2 = 0.0
    sum_d2 = 0.0
    max_abs = 0.0
    nfinite = 0
    mism = 0
    for i in range(0, n, chunk):
        tc = t[i : i + chunk]
        cc = c[i : i + chunk].double()
        tcf = tc.float().double()  # the truth's non-finite values cast to the output dtype
        mism += int(
            (
                (torch.isnan(tcf) != torch.isnan(cc))
                | (torch.isposinf(tcf) != torch.isposinf(cc))
                | (torch.isneginf(tcf) != torch.isneginf(cc))
            ).sum()
        )
        fin = torch.isfinite(tcf) & torch.isfinite(cc)
        tt = tc[fin]
        d = cc[fin] - tt
        nfinite += int(fin.sum())
        sum_t2 += float((tt * tt).sum())
        sum_d2 += float((d * d).sum())
        if d.numel():
            max_abs = max(max_abs, float(d.abs().max()))
        del tc, cc, tcf, fin, tt, d
    rms = math.sqrt(sum_t2 / nfinite) if nfinite else 0.0
    worst = 0.0
    for i in range(0, n, chunk):
        tc = t[i : i + chunk]
        cc = c[i : i + chunk].double()
        fin = torch.isfinite(tc) & torch.isfinite(cc)
        if fin.any():
            r = (cc[fin] - tc[fin]).abs() / (tc[fin].abs() + rms)
            worst = max(worst, float(r.max()) if rms > 0 else float(r.nan_to_num(0).max()))
        del tc, cc, fin
    normwise = math.sqrt(sum_d2) / math.sqrt(sum_t2) if sum_t2 > 0 else math.sqrt(sum_d2)
    return {
        "normwise": normwise,
        "max_abs": max_abs,
        "elem_ratio": worst,
        "nonfinite_mismatch": mism,
        "rms_truth": rms,
        "n": n,
    }


def judge(cand: dict, ref: dict) -> bool:
    ok_norm = cand["normwise"] <= max(1e-3, 4 * ref["normwise"])
    ok_elem = cand["elem_ratio"] <= max(1e-2, 4 * ref["elem_ratio"])
    return bool(ok_norm and ok_elem and cand["nonfinite_mismatch"] == 0)


def time_ms(fn, args, warmup=3, iters=20) -> float:
    import torch

    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        torch.cuda.synchronize()
        ts = []
        for _ in range(iters):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn(*args)
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


# ---- inputs
CHUNK = 1 << 26


def fill_wide_(x, gen) -> None:
    """In place: randn * 1000, a few +-1e6 spikes, zero first row, constant second row."""
    import torch

    flat = x.view(-1)
    for i in range(0, flat.numel(), CHUNK):  # chunked: no input-sized temporaries
        flat[i : i + CHUNK].normal_(0.0, 1000.0, generator=gen)
    k = min(16, flat.numel())
    idx = torch.randint(0, flat.numel(), (k,), device=x.device, generator=gen)
    sgn = torch.where(torch.rand(k, device=x.device, generator=gen) < 0.5, -1.0, 1.0)
    flat[idx] = sgn * 1e6
    if x.dim() >= 2 and x.shape[0] >= 3:
        x[0].zero_()
        x[1].fill_(3.0)


def fill_offset_(x, sigma: float, gen) -> None:
    """In place: sigma * randn + 8 sigma, then 5% of the elements negated (chunked)."""
    import torch

    sigma = sigma or 1.0
    flat = x.view(-1)
    for i in range(0, flat.numel(), CHUNK):
        c = flat[i : i + CHUNK]
        c.normal_(8.0 * sigma, sigma, generator=gen)
        m = torch.rand(c.shape, device=c.device, generator=gen) < 0.05
        c[m] = -c[m]
        del m


def rms_of(x) -> float:
    import torch

    return float(torch.linalg.vector_norm(x)) / math.sqrt(max(1, x.numel()))


def redraw_params_(ref, cand, gen) -> list[str]:
    """Redraw the reference's float parameters and copy them into the candidate by name."""
    import torch

    done = []
    cstate = dict(cand.named_parameters())
    cstate.update(dict(cand.named_buffers()))
    with torch.no_grad():
        for name, p in list(ref.named_parameters()) + list(ref.named_buffers()):
            if not p.is_floating_point() or p.numel() == 0:
                continue
            spread = p.numel() > 1 and float(p.std()) > 0
            if spread:
                new = torch.randn(p.shape, device=p.device, generator=gen) * p.std() + p.mean()
            elif float(p.abs().max()) > 0 and bool((p > 0).all()):
                new = p * torch.exp(0.5 * torch.randn(p.shape, device=p.device, generator=gen))
            else:
                sd = max(float(p.abs().max()), 0.1)
                new = torch.randn(p.shape, device=p.device, generator=gen) * sd
            p.copy_(new)
            if name in cstate and cstate[name].shape == p.shape:
                cstate[name].copy_(new)
                done.append(name)
            else:
                done.append(name + " (NOT in candidate)")
    return done


# ---- one problem
def truth_of(ref, inputs):
    import torch

    ref64 = copy.deepcopy(ref).double()
    with torch.no_grad():
        out = ref64(
            *[x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs]
        )
    del ref64
    return out


def check_one(name: str, problems: Path, cands: Path) -> dict:
    import torch

    rec: dict = {
        "problem": name,
        "candidate": str((cands / f"{name}.py").relative_to(REPO))
        if (cands / f"{name}.py").is_relative_to(REPO)
        else str(cands / f"{name}.py"),
    }
    dev = torch.device("cuda")
    t0 = time.time()
    pm = load_module(problems / f"{name}.py", "kbprob")
    cm = load_module(cands / f"{name}.py", "kbcand")
    rec["import_s"] = round(time.time() - t0, 1)
    init = pm.get_init_inputs()
    torch.manual_seed(42)
    ref = pm.Model(*init).to(dev).eval()
    torch.manual_seed(42)
    cand = cm.ModelNew(*init).to(dev).eval()
    torch.manual_seed(42)
    with torch.device(dev):
        inputs = pm.get_inputs()
    inputs = [x.to(dev) if torch.is_tensor(x) else x for x in inputs]
    rec["input_shapes"] = [list(x.shape) for x in inputs if torch.is_tensor(x)]
    nbytes = sum(x.numel() * x.element_size() for x in inputs if torch.is_tensor(x))
    rec["input_gb"] = round(nbytes / 1e9, 2)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)

    def run_family(fam: str) -> None:
        with torch.no_grad():
            out_c = cand(*inputs)
            torch.cuda.synchronize()
            set_tf32(True)
            out_r = ref(*inputs)
            set_tf32(False)
            torch.cuda.synchronize()
        rec["output_shape"] = list(out_c.shape)
        shape_ok = tuple(out_c.shape) == tuple(out_r.shape) and out_c.dtype == out_r.dtype
        t = truth_of(ref, inputs)
        mc = compare(out_c, t)
        mr = compare(out_r, t)
        del out_c, out_r, t
        gc.collect()
        torch.cuda.empty_cache()
        rec[fam] = {
            "cand": mc,
            "ref_tf32": mr,
            "shape_ok": shape_ok,
            "pass": bool(shape_ok and judge(mc, mr)),
        }

    run_family("native")
    # timing on the native inputs
    rec["time_ms"] = {"cand": time_ms(cand, inputs)}
    set_tf32(True)
    rec["time_ms"]["ref_tf32"] = time_ms(ref, inputs)
    set_tf32(False)
    rec["time_ms"]["ref_fp32"] = time_ms(ref, inputs)
    rec["speedup_vs_tf32"] = rec["time_ms"]["ref_tf32"] / rec["time_ms"]["cand"]
    rec["speedup_vs_fp32"] = rec["time_ms"]["ref_fp32"] / rec["time_ms"]["cand"]

    # wide range, written into the same tensors (same addresses), parameters redrawn
    sigmas = [rms_of(x) if torch.is_tensor(x) and x.is_floating_point() else 0.0 for x in inputs]
    rec["params_redrawn"] = redraw_params_(ref, cand, gen)
    for x in inputs:
        if torch.is_tensor(x) and x.is_floating_point():
            fill_wide_(x, gen)
    run_family("wide")
    for x, sg in zip(inputs, sigmas, strict=True):
        if torch.is_tensor(x) and x.is_floating_point():
            fill_offset_(x, sg, gen)
    run_family("offset")
    rec["pass"] = all(rec[f]["pass"] for f in ("native", "wide", "offset"))
    rec["seconds"] = round(time.time() - t0, 1)
    return rec  # one problem per child process: its memory goes back when the child exits


# ---- driver
def prebuild(names: list[str], cands: Path, n: int, env: dict) -> dict:
    """Build the extensions n at a time by importing each candidate in a child process."""
    procs: dict = {}
    results: dict = {}
    pending = list(names)
    while pending or procs:
        while pending and len(procs) < n:
            nm = pending.pop(0)
            code = (
                "import importlib.util,sys;p=sys.argv[1];"
                "s=importlib.util.spec_from_file_location('m',p);"
                "m=importlib.util.module_from_spec(s);s.loader.exec_module(m)"
            )
            procs[nm] = (
                subprocess.Popen(
                    [sys.executable, "-c", code, str(cands / f"{nm}.py")],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
                time.time(),
            )
        time.sleep(0.5)
        for nm, (p, t0) in list(procs.items()):
            if p.poll() is not None:
                out = p.stdout.read() if p.stdout else ""
                results[nm] = {
                    "rc": p.returncode,
                    "s": round(time.time() - t0, 1),
                    "log_tail": out[-3000:] if p.returncode else "",
                }
                del procs[nm]
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=Path, required=True)
    ap.add_argument("--cands", type=Path, default=DEFAULT_CANDS)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--prebuild", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=0.0, help="seconds; 0 = none")
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.one:  # child: check one candidate, print one JSON line
        try:
            rec = check_one(args.one, args.problems.resolve(), args.cands.resolve())
        except Exception as e:
            rec = {
                "problem": args.one,
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc()[-3000:],
            }
        print("KBJSON " + json.dumps(rec), flush=True)
        return 0

    out = args.out or Path(os.environ.get("OUT", ".")) / "kb_check.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    names = sorted((p.stem for p in args.cands.glob("*.py")), key=lambda s: int(s.split("_")[0]))
    if args.only:
        want = [w.strip() for w in args.only.split(",") if w.strip()]
        names = [n for n in names if any(n == w or n.split("_")[0] == w for w in want)]
    env = dict(os.environ)
    env.setdefault("TORCH_EXTENSIONS_DIR", str(REPO / ".kbv-cache" / "torch_extensions"))
    env.setdefault("MAX_JOBS", "2")
    env.setdefault("PYTHONUNBUFFERED", "1")
    start = time.time()
    if args.prebuild > 0:
        pb = prebuild(names, args.cands.resolve(), args.prebuild, env)
        for nm, r in pb.items():
            print(f"build {nm}: rc={r['rc']} {r['s']}s", flush=True)
            if r["rc"]:
                print(r["log_tail"], flush=True)
    rows = []
    with open(out, "a") as fh:
        for nm in names:
            if args.deadline and time.time() - start > args.deadline:
                rec = {"problem": nm, "skipped": "deadline"}
            else:
                try:
                    cmd = [
                        sys.executable,
                        __file__,
                        "--problems",
                        str(args.problems.resolve()),
                        "--cands",
                        str(args.cands.resolve()),
                        "--one",
                        nm,
                    ]
                    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
                    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("KBJSON ")]
                    if lines:
                        rec = json.loads(lines[-1][7:])
                    else:
                        rec = {
                            "problem": nm,
                            "error": f"child exited {p.returncode} without a result",
                            "log_tail": (p.stdout + p.stderr)[-3000:],
                        }
                except subprocess.TimeoutExpired:
                    rec = {"problem": nm, "error": "timeout (300 s)"}
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            rows.append(rec)
            if "error" in rec:
                tail = rec.get("traceback", rec.get("log_tail", ""))[-1500:]
                print(f"{nm}: ERROR {rec['error']}\n{tail}", flush=True)
            elif "skipped" not in rec:
                print(f"{nm}: done in {rec.get('seconds')}s pass={rec.get('pass')}", flush=True)
    # summary table last
    print(
        f"\n{'problem':34s} {'pass':5s} {'native':>8s} {'ref':>8s} {'wide':>8s} {'ref':>8s} "
        f"{'offset':>8s} {'ref':>8s} {'cand ms':>8s} {'tf32 ms':>8s} {'fp32 ms':>8s} {'xTF32':>6s}"
    )
    for r in rows:
        if "error" in r or "skipped" in r:
            print(f"{r['problem']:34s} {'ERROR' if 'error' in r else 'SKIP'}")
            continue
        errs = " ".join(
            f"{r[fam][who]['normwise']:8.1e}"
            for fam in ("native", "wide", "offset")
            for who in ("cand", "ref_tf32")
        )
        tm = r["time_ms"]
        print(
            f"{r['problem'][:34]:34s} {str(r['pass']):5s} {errs} {tm['cand']:8.3f} "
            f"{tm['ref_tf32']:8.3f} {tm['ref_fp32']:8.3f} {r['speedup_vs_tf32']:6.2f}"
        )
    print(f"total {time.time() - start:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
