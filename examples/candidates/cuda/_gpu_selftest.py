# Temporary GPU self-test for the CUDA candidates (not a candidate; deleted after use).
import copy
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import time
import traceback

import torch

ROOT = os.getcwd()
CAND = os.environ.get("KBV_SELFTEST_CAND", os.path.join(ROOT, "examples/candidates/cuda"))
PROB = os.path.join(ROOT, "problems")
FILES = [
    "level1/1_Square_matrix_multiplication.py",
    "level1/2_Conv2d_3x3.py",
    "level1/3_ReLU.py",
    "level1/4_Softmax.py",
    "level1/5_LayerNorm.py",
    "level1/6_Sum_reduction_over_a_dimension.py",
    "level1/7_CrossEntropyLoss.py",
    "level1/8_Argmax_over_a_dimension.py",
    "level1/9_Batched_matrix_multiplication.py",
    "level2/1_Gemm_BiasAdd_ReLU.py",
    "level2/2_Gemm_Scale_Sigmoid.py",
    "level2/3_Conv2d_Add_Tanh.py",
    "level3/1_MLP.py",
]
RESULTS = []


def log(*a):
    print(*a, flush=True)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def build(rel):
    t = time.time()
    try:
        load(os.path.join(CAND, rel), "c_" + rel.replace("/", "_")[:-3])
        return rel, "ok", time.time() - t
    except Exception:
        return rel, traceback.format_exc()[-3000:], time.time() - t


def is_float(t):
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def family_inputs(inputs, fam, g):
    out = []
    for t in inputs:
        if not is_float(t):
            out.append(t)
            continue
        shp = t.shape
        if fam == "native":
            x = t
        elif fam == "mixed":
            x = torch.randn(shp, generator=g) * 2.0 + 3.0
        elif fam == "offset":
            x = torch.randn(shp, generator=g) * 0.5 + 100.0
        elif fam == "heavy":
            x = torch.randn(shp, generator=g) * torch.exp(torch.randn(shp, generator=g) * 1.5)
            spikes = torch.rand(shp, generator=g) < 1e-3
            x = torch.where(spikes, torch.sign(torch.randn(shp, generator=g)) * 3e3, x)
        elif fam == "ties":
            x = torch.round(torch.rand(shp, generator=g) * 4.0) - 2.0
            if x.dim() >= 2:
                x[0].zero_()  # a whole zero row
                x[-1] = 1.5  # a constant row
        elif fam == "zeros":
            x = torch.zeros(shp)
        else:
            raise ValueError(fam)
        out.append(x.to(t.dtype))
    return out


def redraw_params(model, g):
    with torch.no_grad():
        for _, p in model.named_parameters():
            scale = max(p.detach().abs().mean().item(), 0.05) * 1.5
            p.copy_((torch.randn(p.shape, generator=g) * scale + 0.1 * scale).to(p.device))


def compare(y, t, y_tf32):
    r = {}
    if not isinstance(y, torch.Tensor):
        return {"fail": f"output type {type(y)}"}
    if y.shape != t.shape or y.dtype != (torch.float32 if t.dtype == torch.float64 else t.dtype):
        return {"fail": f"shape/dtype {tuple(y.shape)} {y.dtype} vs {tuple(t.shape)} {t.dtype}"}
    if not y.is_floating_point():
        mism = int((y.cpu() != t.cpu()).sum())
        return {"mismatch": mism, "fail": mism > 0}
    yd, td = y.double(), t
    nan_y, nan_t = torch.isnan(yd), torch.isnan(td)
    r["nan_mismatch"] = int((nan_y != nan_t).sum())
    fin = ~(nan_y | nan_t)
    diff = (yd - td)[fin]
    tn = td[fin].norm().item()
    r["rel"] = diff.norm().item() / tn if tn > 0 else diff.norm().item()
    r["maxabs_rel"] = diff.abs().max().item() / max(td[fin].abs().max().item(), 1e-30) if diff.numel() else 0.0
    if y_tf32 is not None:
        dr = (y_tf32.double() - td)[fin]
        r["ref_tf32_rel"] = dr.norm().item() / tn if tn > 0 else dr.norm().item()
    r["fail"] = bool(r["nan_mismatch"] > 0 or not (r["rel"] < 1e-3))
    return r


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def run_case(label, ref, new, inputs):
    dev = torch.device("cuda")
    xin = [t.to(dev) if isinstance(t, torch.Tensor) else t for t in inputs]
    with torch.no_grad():
        y = new(*xin)
        torch.cuda.synchronize()
        set_tf32(True)
        y_tf32 = ref(*xin)
        set_tf32(False)
        ref64 = copy.deepcopy(ref).double()
        x64 = [t.double() if is_float(t) else t for t in xin]
        t = ref64(*x64)
        torch.cuda.synchronize()
    res = compare(y, t, y_tf32 if y_tf32.is_floating_point() else None)
    alias = any(isinstance(a, torch.Tensor) and a.data_ptr() == y.data_ptr() for a in xin)
    if alias:
        res["fail"] = True
        res["alias"] = True
    res["case"] = label
    RESULTS.append(res)
    log(("FAIL " if res.get("fail") else "ok   ") + json.dumps(res))


def bench(fn, xin, iters=20):
    for _ in range(3):
        fn(*xin)
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*xin)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def test_problem(rel, size, cand, fams):
    os.environ["KBV_SIZE"] = size
    prob = load(os.path.join(PROB, rel), f"p_{size}_" + rel.replace("/", "_")[:-3])
    init = prob.get_init_inputs()
    torch.manual_seed(0)
    ref = prob.Model(*init).cuda()
    new = cand.ModelNew(*init).cuda()
    ks = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    kn = {k: tuple(v.shape) for k, v in new.state_dict().items()}
    if ks != kn:
        RESULTS.append({"case": f"{rel} {size} state_dict", "fail": True})
        log(f"FAIL state_dict {rel}: {ks} vs {kn}")
        return
    g = torch.Generator().manual_seed(1234)
    for fam in fams:
        if fam != "native":
            redraw_params(ref, g)
        new.load_state_dict(ref.state_dict())
        inputs = family_inputs(prob.get_inputs(), fam, g)
        run_case(f"{rel} {size} {fam}", ref, new, inputs)
    if size == "large":
        xin = [t.cuda() for t in prob.get_inputs()]
        with torch.no_grad():
            set_tf32(True)
            tr = bench(ref, xin)
            set_tf32(False)
            tf = bench(ref, xin)
            tn = bench(new, xin)
        log(f"TIME {rel}: cand {tn:.4f} ms, ref tf32 {tr:.4f} ms, ref fp32 {tf:.4f} ms")
        RESULTS.append({"case": f"{rel} time", "cand_ms": tn, "tf32_ms": tr, "fp32_ms": tf})


def custom(rel, cand, init, shapes, label, fams=("mixed", "ties")):
    os.environ["KBV_SIZE"] = "small"
    prob = load(os.path.join(PROB, rel), "q_" + rel.replace("/", "_")[:-3])
    torch.manual_seed(0)
    ref = prob.Model(*init).cuda()
    new = cand.ModelNew(*init).cuda()
    g = torch.Generator().manual_seed(99)
    for fam in fams:
        redraw_params(ref, g)
        new.load_state_dict(ref.state_dict())
        base = []
        for s in shapes:
            if isinstance(s, tuple) and s and s[0] == "int":
                base.append(torch.randint(0, s[1], s[2], generator=g))
            else:
                base.append(torch.rand(s, generator=g))
        run_case(f"{rel} custom {label} {fam}", ref, new, family_inputs(base, fam, g))


def main():
    global FILES
    FILES = [f for f in FILES if os.path.exists(os.path.join(CAND, f))]
    t0 = time.time()
    ctx = mp.get_context("spawn")
    with ctx.Pool(len(FILES)) as pool:
        built = pool.map(build, FILES)
    ok = {}
    for rel, st, dt in built:
        log(f"BUILD {rel}: {'ok' if st == 'ok' else 'ERROR'} {dt:.1f}s")
        if st != "ok":
            log(st)
            RESULTS.append({"case": f"{rel} build", "fail": True, "err": st})
    log(f"builds done in {time.time() - t0:.1f}s")
    cands = {}
    for rel, st, _ in built:
        if st == "ok":
            cands[rel] = load(os.path.join(CAND, rel), "c_" + rel.replace("/", "_")[:-3])
    fams_all = ["native", "mixed", "offset", "heavy", "ties", "zeros"]
    for size in ["small", "large"]:
        for rel in FILES:
            if rel not in cands:
                continue
            try:
                test_problem(rel, size, cands[rel], fams_all if size == "small" else
                             ["native", "mixed", "heavy", "ties"])
            except Exception:
                log(f"FAIL exception {rel} {size}\n{traceback.format_exc()}")
                RESULTS.append({"case": f"{rel} {size}", "fail": True})
    customs = [
        ("level1/1_Square_matrix_multiplication.py", [], [(129, 67), (67, 95)], "129x67x95"),
        ("level1/1_Square_matrix_multiplication.py", [], [(1, 1), (1, 1)], "1x1x1"),
        ("level1/1_Square_matrix_multiplication.py", [], [(300, 1001), (1001, 257)], "300x1001x257"),
        ("level1/9_Batched_matrix_multiplication.py", [], [(3, 17, 33), (3, 33, 65)], "3x17x33x65"),
        ("level1/2_Conv2d_3x3.py", [3, 5], [(3, 3, 7, 9)], "c3o5h7w9"),
        ("level1/2_Conv2d_3x3.py", [16, 200], [(2, 16, 33, 31)], "c16o200"),
        ("level2/3_Conv2d_Add_Tanh.py", [3, 5, 5, (5, 1, 1)], [(2, 3, 11, 12)], "k5"),
        ("level2/3_Conv2d_Add_Tanh.py", [7, 9, 3, (9, 1, 1)], [(3, 7, 9, 10)], "k3odd"),
        ("level2/1_Gemm_BiasAdd_ReLU.py", [67, 45, (45,)], [(13, 67)], "odd"),
        ("level2/2_Gemm_Scale_Sigmoid.py", [129, 77], [(5, 129)], "odd"),
        ("level2/2_Gemm_Scale_Sigmoid.py", [4096, 512], [(64, 4096)], "splitk"),
        ("level3/1_MLP.py", [33, [65, 17], 9], [(5, 33)], "odd"),
        ("level1/4_Softmax.py", [], [(7, 1001)], "n1001"),
        ("level1/4_Softmax.py", [], [(5, 3001)], "n3001"),
        ("level1/4_Softmax.py", [], [(3, 5)], "n5"),
        ("level1/5_LayerNorm.py", [(7, 13)], [(3, 5, 7, 13)], "odd"),
        ("level1/5_LayerNorm.py", [(20000,)], [(3, 20000)], "long"),
        ("level1/6_Sum_reduction_over_a_dimension.py", [1], [(3, 1000, 7)], "inner7"),
        ("level1/6_Sum_reduction_over_a_dimension.py", [2], [(3, 5, 3333)], "last"),
        ("level1/6_Sum_reduction_over_a_dimension.py", [0], [(50000, 3, 2)], "first"),
        ("level1/7_CrossEntropyLoss.py", [], [(37, 1), ("int", 1, (37,))], "c1"),
        ("level1/7_CrossEntropyLoss.py", [], [(9000, 33), ("int", 33, (9000,))], "b9000"),
        ("level1/8_Argmax_over_a_dimension.py", [2], [(3, 5, 3333)], "last"),
        ("level1/8_Argmax_over_a_dimension.py", [0], [(50000, 3, 2)], "first"),
        ("level1/8_Argmax_over_a_dimension.py", [1], [(2, 20000, 3)], "split"),
    ]
    for rel, init, shapes, label in customs:
        if rel not in cands:
            continue
        try:
            custom(rel, cands[rel], init, shapes, label)
        except Exception:
            log(f"FAIL exception custom {rel} {label}\n{traceback.format_exc()}")
            RESULTS.append({"case": f"{rel} custom {label}", "fail": True})
    nfail = sum(1 for r in RESULTS if r.get("fail"))
    log(f"TOTAL cases {len(RESULTS)}, failures {nfail}, wall {time.time() - t0:.1f}s")
    out = os.environ.get("OUT", "/tmp")
    with open(os.path.join(out, "selftest.json"), "w") as f:
        json.dump(RESULTS, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
