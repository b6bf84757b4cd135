#!/usr/bin/env python3
"""CPU emulation of the index logic of the trickier candidates (no GPU needed).

Each emulation follows the kernel's own per-block / per-thread arithmetic (tile bounds, clipping,
head/body/tail splits, fragment coordinates) in Python/numpy on small shapes, including edge
cases the problem sizes do not hit, and compares with torch on the CPU. It checks the index
math, not the compiled code: run the GPU check (gpu_check.py) for that.

  python3 cpu_algo_check.py        # prints one line per check, exit 1 on a failure
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

FAILS: list[str] = []


def report(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        FAILS.append(name)


# ---- 45: avgpool2d row kernel
def avgpool2d_emul(x: np.ndarray, k: int, s: int, p: int, vec: bool) -> np.ndarray:
    N, C, H, W = x.shape
    OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    y = np.zeros((N, C, OH, OW), np.float64)
    xs = x.reshape(N * C, H, W)
    for nc, oh in itertools.product(range(N * C), range(OH)):
        h0, h1 = max(oh * s - p, 0), min(oh * s - p + k, H)
        wlast = min((OW - 1) * s - p + k, W)
        ncols = 4 * ((wlast + 3) >> 2) if vec else wlast
        assert ncols <= W
        colsum = np.full(W + 8, np.nan)  # unwritten slots are NaN: reading one shows up
        colsum[:ncols] = xs[nc, h0:h1, :ncols].sum(0)
        for ow in range(OW):
            w0, w1 = max(ow * s - p, 0), min(ow * s - p + k, W)
            y.reshape(N * C, OH, OW)[nc, oh, ow] = colsum[w0:w1].sum() / (k * k)
    return y


def check_avgpool2d() -> None:
    rng = np.random.default_rng(0)
    for H, W, k, s, p in [
        (23, 24, 11, 11, 0),
        (24, 28, 3, 2, 1),
        (17, 20, 4, 3, 2),
        (9, 8, 3, 1, 1),
        (2048 // 64, 2048 // 64, 11, 11, 0),
    ]:
        x = rng.standard_normal((2, 3, H, W))
        ref = F.avg_pool2d(torch.from_numpy(x), k, s, p, count_include_pad=True).numpy()
        for vec in [True, False] if W % 4 == 0 else [False]:
            y = avgpool2d_emul(x, k, s, p, vec)
            report(
                f"avgpool2d H={H} W={W} k={k} s={s} p={p} vec={vec}",
                np.allclose(y, ref, atol=1e-12),
            )


# ---- 46: avgpool3d tile kernel
def avgpool3d_emul(
    x: np.ndarray, k: int, s: int, p: int, vec: bool, smem_bytes=48 * 1024
) -> np.ndarray:
    N, C, D, H, W = x.shape
    OD, OH, OW = [(n + 2 * p - k) // s + 1 for n in (D, H, W)]
    Ws = ((W + 3) // 4) * 4
    tile = 16
    while tile > 1 and ((tile - 1) * s + k) * Ws * 4 > smem_bytes:
        tile -= 1
    assert ((tile - 1) * s + k) * Ws * 4 <= smem_bytes
    ntiles = (OH + tile - 1) // tile
    xv = x.reshape(N * C, D, H, W)
    y = np.full((N * C, OD, OH, OW), np.nan)
    alloc_rows = (min(tile, OH) - 1) * s + k
    for b in range(N * C * OD * ntiles):
        t = b % ntiles
        bb = b // ntiles
        od, nc = bb % OD, bb // OD
        oh0 = t * tile
        nout = min(OH - oh0, tile)
        R = (nout - 1) * s + k
        assert R <= alloc_rows
        ih0 = oh0 * s - p
        d0, d1 = max(od * s - p, 0), min(od * s - p + k, D)
        wlast = min((OW - 1) * s - p + k, W)
        ncols = 4 * ((wlast + 3) >> 2) if vec else wlast
        slab = np.full((alloc_rows, Ws), np.nan)
        for r in range(R):
            ih = ih0 + r
            slab[r, :ncols] = xv[nc, d0:d1, ih, :ncols].sum(0) if 0 <= ih < H else 0.0
        for ohl, ow in itertools.product(range(nout), range(OW)):
            w0, w1 = max(ow * s - p, 0), min(ow * s - p + k, W)
            r0 = ohl * s
            y[nc, od, oh0 + ohl, ow] = slab[r0 : r0 + k, w0:w1].sum() / k**3
    return y.reshape(N, C, OD, OH, OW)


def check_avgpool3d() -> None:
    rng = np.random.default_rng(1)
    for D, H, W, k, s, p, smem in [
        (8, 40, 16, 3, 2, 1, 48 * 1024),
        (7, 37, 12, 3, 2, 1, 48 * 1024),
        (6, 9, 8, 2, 2, 0, 48 * 1024),
        (5, 11, 10, 3, 1, 1, 8 * 4 * 12),
        (4, 6, 7, 3, 3, 0, 48 * 1024),
    ]:
        x = rng.standard_normal((1, 2, D, H, W))
        ref = F.avg_pool3d(torch.from_numpy(x), k, s, p, count_include_pad=True).numpy()
        for vec in [True, False] if W % 4 == 0 else [False]:
            y = avgpool3d_emul(x, k, s, p, vec, smem)
            report(
                f"avgpool3d D={D} H={H} W={W} k={k} s={s} p={p} smem={smem} vec={vec}",
                np.allclose(y, ref, atol=1e-12),
            )


# ---- 42: maxpool stride-1 sliding window
def nanmax(m: float, v: float) -> float:
    return v if (v > m or v != v) else m


def maxpool_s1_emul(x: np.ndarray, k: int, p: int, tile_rows=32, kmax=8) -> np.ndarray:
    N, C, H, W = x.shape
    OH, OW = H + 2 * p - (k - 1), W + 2 * p - (k - 1)
    y = np.full((N * C, OH, OW), -12345.0)
    xs = x.reshape(N * C, H, W)
    nrow = (OH + tile_rows - 1) // tile_rows
    for nc, rt, ow in itertools.product(range(N * C), range(nrow), range(OW)):
        oh0 = rt * tile_rows
        oh1 = min(oh0 + tile_rows, OH)
        win = [-math.inf] * kmax
        for ih in range(oh0 - p, oh1 - 1 - p + k):
            hm = -math.inf
            if 0 <= ih < H:
                for kw in range(k):
                    iw = ow - p + kw
                    if 0 <= iw < W:
                        hm = nanmax(hm, xs[nc, ih, iw])
            win = win[1:] + [hm]
            oh = ih + p - (k - 1)
            if oh >= oh0:
                m = -math.inf
                for i in range(kmax):
                    if i >= kmax - k:
                        m = nanmax(m, win[i])
                y[nc, oh, ow] = m
    return y.reshape(N, C, OH, OW)


def check_maxpool() -> None:
    rng = np.random.default_rng(2)
    for H, W, k, p in [(70, 9, 4, 1), (33, 7, 3, 1), (40, 6, 8, 4), (35, 5, 1, 0), (66, 8, 5, 2)]:
        x = rng.standard_normal((1, 2, H, W))
        x[0, 0, 5, 3] = np.nan
        x[0, 1, 7:9, :] = 2.5  # ties
        ref = F.max_pool2d(torch.from_numpy(x), k, 1, p).numpy()
        y = maxpool_s1_emul(x, k, p)
        same = np.array_equal(np.isnan(y), np.isnan(ref)) and np.allclose(
            np.nan_to_num(y, nan=0.0), np.nan_to_num(ref, nan=0.0), atol=0
        )
        report(f"maxpool2d s=1 H={H} W={W} k={k} p={p} (NaN + ties)", same)


# ---- 38/39: row head / body / tail split
def check_row_split() -> None:
    ok = True
    for n, base_off in itertools.product([1, 2, 3, 4, 5, 7, 8, 13, 65535, 65536], range(4)):
        for row in range(5):
            ax = 4 * (base_off + row * n)  # byte address of the row (x and y share the offset)
            head = min(((16 - (ax & 15)) & 15) >> 2, n)
            nb = (n - head) >> 2
            tail0 = head + (nb << 2)
            cover = np.zeros(n, int)
            cover[:head] += 1
            for i in range(nb):
                assert (ax + 4 * (head + 4 * i)) % 16 == 0  # each float4 is 16-byte aligned
                cover[head + 4 * i : head + 4 * i + 4] += 1
            cover[tail0:] += 1
            ok &= bool((cover == 1).all()) and n - tail0 < 4
    report("rownorm head/body/tail cover every element once, float4s aligned", ok)


# ---- 34/35: chunked group statistics
def groupnorm_emul(x: np.ndarray, G: int, w, b, eps: float, chunk: int) -> np.ndarray:
    N, C = x.shape[:2]
    HW = int(np.prod(x.shape[2:]))
    cpg = C // G
    P = (HW + chunk - 1) // chunk
    xs = x.reshape(N * C, HW)
    nq = N * C * P
    psum, psq = np.zeros(nq), np.zeros(nq)
    for q in range(nq):
        plane, p_ = divmod(q, P)
        b0 = p_ * chunk
        seg = xs[plane, b0 : b0 + min(chunk, HW - b0)]
        psum[q], psq[q] = seg.sum(), (seg * seg).sum()
    y = np.empty_like(xs)
    for q in range(nq):
        plane, p_ = divmod(q, P)
        n_, c = divmod(plane, C)
        g = c // cpg
        q0 = (n_ * C + g * cpg) * P
        cnt = cpg * HW
        mean = psum[q0 : q0 + cpg * P].sum() / cnt
        var = max(psq[q0 : q0 + cpg * P].sum() / cnt - mean * mean, 0.0)
        scale = (1.0 / math.sqrt(var + eps)) * (w[c] if w is not None else 1.0)
        shift = b[c] if b is not None else 0.0
        b0 = p_ * chunk
        sl = slice(b0, b0 + min(chunk, HW - b0))
        y[plane, sl] = (xs[plane, sl] - mean) * scale + shift
    return y.reshape(x.shape)


def check_groupnorm() -> None:
    rng = np.random.default_rng(3)
    for N, C, H, W, G, chunk in [
        (2, 8, 5, 7, 4, 8),
        (3, 6, 4, 4, 3, 16),
        (2, 4, 3, 3, 4, 4),
        (1, 6, 6, 6, 1, 5),
    ]:
        x = rng.standard_normal((N, C, H, W)) * 3 + 100.0
        x[0, : C // G] = 7.0  # a constant group
        w = np.exp(0.5 * rng.standard_normal(C))
        bb = 0.1 * rng.standard_normal(C)
        ref = F.group_norm(
            torch.from_numpy(x), G, torch.from_numpy(w), torch.from_numpy(bb), 1e-5
        ).numpy()
        y = groupnorm_emul(x, G, w, bb, 1e-5, chunk)
        report(
            f"groupnorm N={N} C={C} HW={H * W} G={G} chunk={chunk}", np.allclose(y, ref, atol=1e-9)
        )
        ref_i = F.instance_norm(torch.from_numpy(x), eps=1e-5).numpy()
        y_i = groupnorm_emul(x, C, None, None, 1e-5, chunk)
        report(
            f"instancenorm N={N} C={C} HW={H * W} chunk={chunk}", np.allclose(y_i, ref_i, atol=1e-9)
        )


# ---- 1: matmul tiles and mma fragments
def mma_m16n8k8(c: np.ndarray, a_regs, b_regs) -> None:
    """PTX m16n8k8 .row.col tf32: rebuild the tiles from the lanes' registers, multiply, scatter.
    a_regs[lane][r] is A(g + 8 * (r % 2), t + 4 * (r // 2)); b_regs[lane][r] is B(t + 4 r, g);
    c[lane][r] is C(g + 8 * (r // 2), 2 t + r % 2); g = lane // 4, t = lane % 4."""
    A = np.zeros((16, 8))
    Bm = np.zeros((8, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for r in range(4):
            A[g + 8 * (r % 2), t + 4 * (r // 2)] = a_regs[lane][r]
        for r in range(2):
            Bm[t + 4 * r, g] = b_regs[lane][r]
    D = A @ Bm
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for r in range(4):
            c[lane][r] += D[g + 8 * (r // 2), 2 * t + r % 2]


def matmul_emul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    BM = BN = 128
    BK = 32
    LDA, LDB = BK + 4, BN + 8
    M, K = A.shape
    N = B.shape[1]
    C = np.full((M, N), np.nan)
    for by, bx in itertools.product(range(M // BM), range(N // BN)):
        m0, n0 = by * BM, bx * BN
        acc = np.zeros((8, 4, 4, 32, 4))  # warp, mi, ni, lane, e
        for kt in range(K // BK):
            k0 = kt * BK
            As = np.full(BM * LDA, np.nan)
            Bs = np.full(BK * LDB, np.nan)
            for tid in range(256):  # load_tiles
                for i in range(4):
                    idx = tid + i * 256
                    r, c4 = idx >> 3, idx & 7
                    As[r * LDA + c4 * 4 : r * LDA + c4 * 4 + 4] = A[
                        m0 + r, k0 + c4 * 4 : k0 + c4 * 4 + 4
                    ]
                    r, c4 = idx >> 5, idx & 31
                    Bs[r * LDB + c4 * 4 : r * LDB + c4 * 4 + 4] = B[
                        k0 + r, n0 + c4 * 4 : n0 + c4 * 4 + 4
                    ]
            for warp in range(8):
                wm, wn = warp >> 2, warp & 3
                for kk in range(0, BK, 8):
                    af = [[None] * 32 for _ in range(4)]
                    bf = [[None] * 32 for _ in range(4)]
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        as_ = (wm * 64 + g) * LDA + t
                        bs_ = t * LDB + wn * 32 + g
                        for mi in range(4):
                            ap = as_ + mi * 16 * LDA + kk
                            af[mi][lane] = [
                                As[ap],
                                As[ap + 8 * LDA],
                                As[ap + 4],
                                As[ap + 8 * LDA + 4],
                            ]
                        for ni in range(4):
                            bp = bs_ + kk * LDB + ni * 8
                            bf[ni][lane] = [Bs[bp], Bs[bp + 4 * LDB]]
                    for mi, ni in itertools.product(range(4), range(4)):
                        mma_m16n8k8(acc[warp, mi, ni], af[mi], bf[ni])
        for warp, mi, ni, lane in itertools.product(range(8), range(4), range(4), range(32)):
            wm, wn = warp >> 2, warp & 3
            g, t = lane >> 2, lane & 3
            row = m0 + wm * 64 + mi * 16 + g
            col = n0 + wn * 32 + ni * 8 + 2 * t
            assert np.isnan(C[row, col]) and np.isnan(C[row + 8, col + 1])
            C[row, col : col + 2] = acc[warp, mi, ni, lane, 0:2]
            C[row + 8, col : col + 2] = acc[warp, mi, ni, lane, 2:4]
    return C


def check_matmul() -> None:
    rng = np.random.default_rng(4)
    A = rng.standard_normal((256, 64))
    B = rng.standard_normal((64, 128))
    C = matmul_emul(A, B)
    report(
        "matmul tiles/fragments 256x64 @ 64x128 (every C written once, equals A @ B)",
        not np.isnan(C).any() and np.allclose(C, A @ B, atol=1e-10),
    )

    # 3xTF32 split precision, emulated with round-to-nearest to 10 mantissa bits
    def tf32(v):
        m, e = np.frexp(v)
        return np.ldexp(np.round(m * 2**11) / 2**11, e)

    a = (rng.standard_normal((64, 4096)) * np.exp(2.5 * rng.standard_normal((64, 4096)))).astype(
        np.float32
    )
    b = (rng.standard_normal((4096, 64)) * np.exp(2.5 * rng.standard_normal((4096, 64)))).astype(
        np.float32
    )
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ah, bh = tf32(a64), tf32(b64)
    al, bl = tf32(a64 - ah), tf32(b64 - bh)
    t = a64 @ b64
    one = ah @ bh
    three = al @ bh + ah @ bl + ah @ bh
    e1 = np.linalg.norm(one - t) / np.linalg.norm(t)
    e3 = np.linalg.norm(three - t) / np.linalg.norm(t)
    report(
        "3xTF32 operand error on wide-range data (exact accumulation)",
        e3 < 1e-6,
        f"1xTF32 {e1:.2e}  3xTF32 {e3:.2e}",
    )


def main() -> int:
    check_row_split()
    check_avgpool2d()
    check_avgpool3d()
    check_maxpool()
    check_groupnorm()
    check_matmul()
    print("FAILED: " + ", ".join(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
