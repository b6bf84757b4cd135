"""kbv_native's case-path pieces (docs/case-path.md): SharedArena (memory shared with another
process through a file descriptor, DLPack views, revocation), the comparison pass where the
tensors live (measure, describe_output, finite_rms) and keyed checksums.

The CPU tests run everywhere. Their GPU twins need kbv_native built with CUDA and a visible GPU;
they are skipped otherwise.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
import torch  # before kbv_native: the module must share torch's CUDA runtime
from conftest import NATIVE_DIR, import_native_or_skip_module

kn = import_native_or_skip_module()

GPU = bool(kn.has_cuda) and torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs kbv_native built with CUDA and a visible GPU")

PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1 << 20
DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
INF = math.inf
NAN = math.nan
# The overflow thresholds of check/elementwise.hpp: the magnitudes that round to infinity.
THRESHOLDS = {
    "float32": math.ldexp(1, 128) - math.ldexp(1, 103),
    "bfloat16": math.ldexp(1, 128) - math.ldexp(1, 119),
    "float16": 65520.0,
}


def sample(dtype: torch.dtype, n: int, seed: int, device: str = "cpu") -> torch.Tensor:
    """n values of dtype: normal floats, small integers, random booleans."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g, dtype=torch.float64) * 10).to(dtype).to(device)
    if dtype == torch.bool:
        return (torch.rand(n, generator=g) > 0.5).to(device)
    low, high = (0, 200) if dtype == torch.uint8 else (-100, 100)
    return torch.randint(low, high, (n,), generator=g).to(dtype).to(device)


def operand(t: torch.Tensor) -> tuple:
    assert t.is_contiguous()
    device = t.device.index if t.is_cuda else -1
    return (t.data_ptr(), str(t.dtype).removeprefix("torch."), t.numel(), device)


def shaped(t: torch.Tensor) -> tuple:
    ptr, dtype, _, device = operand(t)
    return (ptr, dtype, list(t.shape), device)


def spec(threshold=INF, scale=1.0, tol_abs=0.0, tol_rel=0.0, nan_equal=True, sens=None) -> dict:
    out = {
        "threshold": threshold if threshold != INF else "inf",
        "scale": scale,
        "tol_abs": tol_abs if tol_abs != INF else "inf",
        "tol_rel": tol_rel,
        "nan_equal": nan_equal,
    }
    if sens is not None:
        out["sens"] = sens
    return out


def decoded(v):
    return float(v) if isinstance(v, str) else v


def run_child(script: str, *, pass_fds=(), timeout=120) -> subprocess.CompletedProcess:
    """Run a Python script in a fresh process (no shared mappings with this one) that has torch
    and kbv_native importable."""
    prelude = (
        f"import sys; sys.path.insert(0, {NATIVE_DIR!r}); import torch; import kbv_native as kn\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        pass_fds=pass_fds,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def maps_line(address: int) -> str:
    with open("/proc/self/maps") as maps:
        for line in maps:
            span = line.split()[0]
            start, end = (int(x, 16) for x in span.split("-"))
            if start <= address < end:
                return line
    return ""


def memfd_count() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += "memfd:kbv-arena" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return count


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


# ---- SharedArena on the host ----------------------------------------------------------------


def test_host_arena_is_page_rounded_zeroed_and_sealed():
    with kn.SharedArena(10_000, -1) as a:
        assert a.nbytes == 10_000 and a.capacity == -(-10_000 // PAGE) * PAGE
        assert a.device == -1 and a.ptr % PAGE == 0 and not a.revoked and not a.closed
        assert torch.from_dlpack(a.view(0, "uint8", [10_000])).eq(0).all()
        assert "memfd:kbv-arena" in maps_line(a.ptr)
        fd = a.export_fd()
        try:
            assert os.get_inheritable(fd) is False  # close-on-exec
            with pytest.raises(PermissionError):  # sealed: an importer cannot shrink it
                os.ftruncate(fd, 0)
            with pytest.raises(PermissionError):
                os.ftruncate(fd, a.capacity * 2)
        finally:
            os.close(fd)
    assert a.closed and a.ptr == 0
    with pytest.raises(ValueError):
        kn.SharedArena(0, -1)


def test_host_arena_import_in_a_separate_process_sees_and_makes_writes():
    a = kn.SharedArena(3 * MIB + 5, -1)
    mine = torch.from_dlpack(a.view(0, "float32", [1024]))
    mine.copy_(torch.arange(1024, dtype=torch.float32))
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = a.export_fd()
    try:
        socket.send_fds(parent_end, [b"arena"], [fd])
    finally:
        os.close(fd)  # the message holds its own reference
    child = run_child(
        f"""
        import os, socket
        s = socket.socket(fileno={child_end.fileno()})
        msg, fds, _, _ = socket.recv_fds(s, 16, 1)
        b = kn.SharedArena.open(fds[0], {a.nbytes}, -1)
        os.close(fds[0])  # open() does not take the descriptor; the mapping holds the memory
        seen = torch.from_dlpack(b.view(0, "float32", [1024]))
        assert seen[1023].item() == 1023.0, seen[1023]
        torch.from_dlpack(b.view(4096, "int64", [8])).fill_(-7)
        torch.from_dlpack(b.view({a.nbytes} - 1, "uint8", [1])).fill_(0xAB)
        print("ok", b.ptr != 0)
        """,
        pass_fds=[child_end.fileno()],
    )
    child_end.close()
    parent_end.close()
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["ok", "True"]
    assert torch.from_dlpack(a.view(4096, "int64", [8])).eq(-7).all()
    assert torch.from_dlpack(a.view(a.nbytes - 1, "uint8", [1])).item() == 0xAB
    assert mine[5].item() == 5.0
    a.close()


def test_open_checks_the_descriptor_size_and_does_not_close_it():
    with kn.SharedArena(PAGE, -1) as a:
        fd = a.export_fd()
        try:
            with pytest.raises(ValueError, match="fewer than"):
                kn.SharedArena.open(fd, a.capacity + 1, -1)
            b = kn.SharedArena.open(fd, PAGE, -1)
            os.fstat(fd)  # still open
            torch.from_dlpack(b.view(0, "int32", [2])).fill_(9)
            assert torch.from_dlpack(a.view(4, "int32", [1])).item() == 9
            b.close()
        finally:
            os.close(fd)
    with pytest.raises((ValueError, RuntimeError)):
        kn.SharedArena.open(-1, 8, -1)


@pytest.mark.parametrize("name", DTYPES)
def test_every_dtype_goes_through_from_dlpack(name):
    dtype = DTYPES[name]
    with kn.SharedArena(4096, -1) as a:
        size = torch.empty((), dtype=dtype).element_size()
        view = torch.from_dlpack(a.view(2 * size, name, [3, 5]))
        assert view.dtype == dtype and view.shape == (3, 5) and view.device.type == "cpu"
        assert view.data_ptr() == a.ptr + 2 * size
        values = sample(dtype, 15, seed=3).reshape(3, 5)
        view.copy_(values)
        raw = torch.from_dlpack(a.view(2 * size, "uint8", [15 * size]))
        assert torch.equal(raw, values.contiguous().view(torch.uint8).flatten())
        again = torch.from_dlpack(a.view(2 * size, name, [15]))
        assert torch.equal(again, values.flatten())
        scalar = torch.from_dlpack(a.view(0, name, []))
        assert scalar.shape == () and scalar.dtype == dtype
        assert torch.from_dlpack(a.view(4096, name, [0])).numel() == 0
        del view, raw, again, scalar


def test_views_are_bounds_checked():
    with kn.SharedArena(100, -1) as a:
        a.view(96, "float32", [1])
        with pytest.raises(IndexError):
            a.view(100, "float32", [1])
        with pytest.raises(IndexError):
            a.view(0, "float64", [13])
        with pytest.raises(IndexError):
            a.view(0, "uint8", [1 << 62, 1 << 62])  # the size overflows
        with pytest.raises(ValueError, match="multiple"):
            a.view(2, "float32", [1])
        with pytest.raises(ValueError):
            a.view(0, "float32", [-1])
        with pytest.raises(ValueError, match="unknown dtype"):
            a.view(0, "complex64", [1])
    with pytest.raises(RuntimeError, match="closed"):
        a.view(0, "uint8", [1])
    with pytest.raises(RuntimeError, match="closed"):
        a.export_fd()


def test_a_view_keeps_the_arena_alive():
    a = kn.SharedArena(PAGE, -1)
    view = torch.from_dlpack(a.view(0, "int16", [16]))
    ptr = a.ptr
    del a
    gc.collect()
    assert "memfd:kbv-arena" in maps_line(ptr)
    view.fill_(3)
    assert view.sum().item() == 48
    del view
    gc.collect()
    assert "memfd:kbv-arena" not in maps_line(ptr)


def test_revoke_leaves_an_inaccessible_reserved_range():
    a = kn.SharedArena(4 * PAGE, -1)
    view = torch.from_dlpack(a.view(0, "float32", [16]))
    view.fill_(1.0)
    ptr, capacity = a.ptr, a.capacity
    fds_before = memfd_count()
    a.revoke()
    a.revoke()  # idempotent
    assert a.revoked and a.ptr == ptr
    line = maps_line(ptr)
    assert line.split()[1].startswith("---"), line
    assert "memfd" not in line
    assert memfd_count() == fds_before - 1
    with pytest.raises(RuntimeError, match="revoked"):
        a.view(0, "uint8", [1])
    with pytest.raises(RuntimeError, match="revoked"):
        a.export_fd()

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child dies by the signal
        faulthandler.disable()  # pytest's handler would print a traceback first
        try:
            view[0].item()  # the view now dangles: this must fault
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV

    # Closing keeps the range reserved, and no later arena lands on it.
    a.close()
    gc.collect()
    assert maps_line(ptr).split()[1].startswith("---")
    later = [kn.SharedArena(4 * PAGE, -1) for _ in range(8)]
    for b in later:
        assert b.ptr + b.capacity <= ptr or b.ptr >= ptr + capacity
        b.close()


def test_close_and_the_destructor_release_the_memory():
    nbytes = 256 * MIB
    baseline_fds = memfd_count()
    a = kn.SharedArena(nbytes, -1)
    before = rss_bytes()
    torch.from_dlpack(a.view(0, "uint8", [nbytes])).fill_(1)
    assert rss_bytes() - before > 200 * MIB
    ptr = a.ptr
    a.close()
    a.close()  # idempotent
    assert rss_bytes() - before < 32 * MIB
    assert memfd_count() == baseline_fds
    assert maps_line(ptr) == "" or "memfd" not in maps_line(ptr)

    b = kn.SharedArena(nbytes, -1)
    torch.from_dlpack(b.view(0, "uint8", [nbytes])).fill_(1)
    assert memfd_count() == baseline_fds + 1
    del b
    gc.collect()
    assert memfd_count() == baseline_fds
    assert rss_bytes() - before < 32 * MIB


# ---- checksums ------------------------------------------------------------------------------


def checksum(t: torch.Tensor, key: int, nbytes: int | None = None) -> int:
    size = t.numel() * t.element_size() if nbytes is None else nbytes
    return kn.checksum(t.data_ptr(), size, -1, key)


def test_checksum_changes_with_every_single_byte_change_and_only_then():
    key = 0x5DEECE66D_1234
    buffer = torch.randint(0, 256, (67,), dtype=torch.uint8)  # 8 words and a 3-byte tail
    original = checksum(buffer, key)
    assert checksum(buffer, key) == original
    seen = {original}
    for i in range(buffer.numel()):
        old = buffer[i].item()
        for value in range(256):
            if value == old:
                continue
            buffer[i] = value
            seen.add(checksum(buffer, key))
        buffer[i] = old
        assert checksum(buffer, key) == original
    assert len(seen) == 67 * 255 + 1  # every variant distinct from the original and each other


def test_checksum_depends_on_the_key_the_positions_and_the_length():
    data = torch.randint(0, 256, (1 << 20,), dtype=torch.uint8)
    key = 987654321
    base = checksum(data, key)
    assert checksum(data, key + 1) != base
    assert checksum(data, 1 << 63) != checksum(data, (1 << 63) + 1)
    words = data.view(torch.int64)
    swapped = words.clone()
    swapped[[10, 20]] = swapped[[20, 10]]
    if not torch.equal(swapped, words):
        assert checksum(swapped, key) != base
    zeros = torch.zeros(64, dtype=torch.uint8)
    assert checksum(zeros, key, 63) != checksum(zeros, key, 64)  # a trailing zero byte counts
    assert checksum(zeros, key, 0) == checksum(torch.ones(8, dtype=torch.uint8), key, 0)
    for i in (0, 7, 8, 4095, 4096, (1 << 20) - 1):  # first, word edges, page edges, last
        changed = data.clone()
        changed[i] ^= 0x80
        assert checksum(changed, key) != base
    # Unaligned starts read the same bytes.
    assert checksum(data[1:], key) == checksum(data[1:].clone(), key)


def test_checksums_of_several_buffers_are_each_ones_checksum():
    key = 0xABCDEF
    buffers = [torch.randint(0, 256, (n,), dtype=torch.uint8) for n in (0, 1, 8, 67, 4096)]
    listed = [(b.data_ptr(), b.numel()) for b in buffers]
    assert kn.checksums(listed, -1, key) == [checksum(b, key) for b in buffers]
    assert kn.checksums([], -1, key) == []
    with pytest.raises(ValueError):
        kn.checksums([(0, 8)], -1, key)  # a null pointer


def test_checksum_without_cuda_refuses_a_device():
    if GPU:
        pytest.skip("a GPU is visible; the GPU twins cover device checksums")
    with pytest.raises(RuntimeError):
        kn.checksum(1 << 20, 8, 0, 1)


# ---- the comparison pass on the host --------------------------------------------------------


def test_measure_nonfinite_positions_and_values():
    x = torch.tensor([1, NAN, INF, -INF, 5, NAN, 7], dtype=torch.float32)
    y = torch.tensor([1, NAN, INF, INF, NAN, 6, 7], dtype=torch.float64)
    m = kn.measure(operand(x), operand(y), spec(tol_abs=0.5))
    json.dumps(m, allow_nan=False)  # no NaN or infinity in the result
    f = m["figures"]
    assert f["nonfinite_mismatches"] == 3 and m["first_nonfinite_mismatch"] == 3
    assert decoded(m["x_at_first_nonfinite"]) == -INF and m["y_at_first_nonfinite"] == "inf"
    assert f["elements_over"] == 0 and f["max_abs"] == 0 and m["worst"] == -1
    strict = kn.measure(operand(x), operand(y), spec(tol_abs=0.5, nan_equal=False))
    assert strict["figures"]["nonfinite_mismatches"] == 4
    assert strict["first_nonfinite_mismatch"] == 1
    assert strict["x_at_first_nonfinite"] == "nan"


def test_measure_sensitivity_opens_budgets_and_is_read_back():
    y = torch.tensor([1.0, 0.0, 0.0, -2.0], dtype=torch.float64)
    x = torch.tensor([1.0, 0.1, 0.5, -2.0], dtype=torch.float32)
    s = torch.tensor([0.0, 1e-2, 1e-2, 0.0], dtype=torch.float32)
    floor = spec(scale=1.0, tol_abs=1e-2, tol_rel=1e-2)
    m = kn.measure(operand(x), operand(y), spec(1e300, 1.0, 1e-2, 1e-2, True, 16.0), 0, operand(s))
    assert m["figures"]["elements_over"] == 1 and m["worst"] == 2
    assert m["s_at_worst"] == pytest.approx(1e-2)
    assert m["figures"]["budget_ratio"] == pytest.approx(0.5 / (16 * float(s[2])))
    # No multiplier in the spec, or no tensor: the floor alone.
    assert kn.measure(operand(x), operand(y), floor, 0, operand(s))["figures"]["elements_over"] == 2
    assert kn.measure(operand(x), operand(y), floor)["figures"]["elements_over"] == 2
    with pytest.raises(ValueError):
        kn.measure(operand(x), operand(y), floor, 0, operand(s[:2].contiguous()))


def test_measure_ties_go_to_the_smallest_index():
    x = torch.tensor([0.0, 2.0, 0.0, 3.0, 2.0], dtype=torch.float64)
    y = torch.tensor([0.0, 1.0, 0.0, 2.0, 1.0], dtype=torch.float64)
    m = kn.measure(operand(x), operand(y), spec(tol_abs=0.1))
    assert m["figures"]["elements_over"] == 3 and m["worst"] == 1
    assert (m["x_at_worst"], m["y_at_worst"]) == (2.0, 1.0)
    exact = kn.measure(operand(x), operand(y), spec())  # tol 0: every excess is infinite
    assert exact["worst"] == 1


def test_measure_float16_overflow_follows_the_cast():
    x = torch.tensor([INF, 65504, 1.0], dtype=torch.float16)
    y = torch.tensor([70000.0, 70000.0, 1.0], dtype=torch.float64)  # +inf once cast to float16
    m = kn.measure(operand(x), operand(y), spec(threshold=65520.0, tol_abs=1.0))
    assert m["figures"]["nonfinite_mismatches"] == 1 and m["first_nonfinite_mismatch"] == 1
    assert (m["x_at_first_nonfinite"], m["y_at_first_nonfinite"]) == (65504.0, 70000.0)
    assert kn.finite_rms(operand(y), 65520.0) == 1.0
    assert kn.finite_rms(operand(y), "inf") == pytest.approx(math.sqrt((2 * 70000.0**2 + 1) / 3))


def test_measure_integers_exactly():
    big = 1 << 40
    x = torch.tensor([big, big + 1, -3, 0], dtype=torch.int64)
    y = torch.tensor([big, big, -3, 0], dtype=torch.int64)
    m = kn.measure(operand(x), operand(y), spec())
    assert m["figures"]["elements_over"] == 1 and m["worst"] == 1
    assert m["x_at_worst"] == big + 1 and m["y_at_worst"] == big
    same = kn.measure(operand(y), operand(y), spec())
    assert same["figures"]["elements_over"] == 0 and same["figures"]["normwise_rel"] == 0


@pytest.mark.parametrize("name", DTYPES)
def test_measure_agrees_with_torch_on_random_data(name):
    dtype = DTYPES[name]
    n = 50_003
    y = sample(torch.float64, n, seed=1)
    x = (y + 0.05 * sample(torch.float64, n, seed=2)).to(dtype)
    if dtype.is_floating_point:
        x[100] = NAN
        y[100] = NAN  # a match
    scale = kn.finite_rms(operand(y), "inf")
    tol_abs, tol_rel = 0.02 * scale, 0.01
    m = kn.measure(operand(x), operand(y), spec(scale=scale, tol_abs=tol_abs, tol_rel=tol_rel))
    json.dumps(m, allow_nan=False)
    xd, yd = x.double(), y.clone()
    finite = torch.isfinite(xd) & torch.isfinite(yd)
    xd[~finite] = 0
    yd[~finite] = 0
    diff = (xd - yd).abs()
    tol = tol_abs + tol_rel * yd.abs()
    over = diff > tol
    f = m["figures"]
    assert f["numel"] == n and f["scale"] == scale
    assert f["max_abs"] == pytest.approx(diff.max().item(), rel=1e-15)
    assert f["elements_over"] == over.sum().item()
    assert f["normwise_rel"] == pytest.approx((diff.norm() / yd.norm()).item(), rel=1e-12)
    nonzero = yd != 0
    assert f["max_rel"] == pytest.approx((diff[nonzero] / yd.abs()[nonzero]).max().item())
    ratio = (diff / (yd.abs() + scale)).max().item()
    assert f["worst_elem_ratio"] == pytest.approx(ratio, rel=1e-15)
    excess = torch.where(over, diff / tol, torch.zeros_like(diff))
    assert m["worst"] == (int(torch.argmax(excess)) if over.any() else -1)
    assert f["nonfinite_mismatches"] == 0


def test_describe_output_with_and_without_a_float64_truth():
    truth = sample(torch.float64, 10_000, seed=5).reshape(100, 100)
    reference = (truth * (1 + 1e-4 * sample(torch.float64, 10_000, seed=6).reshape(100, 100))).to(
        torch.float32
    )
    b = kn.describe_output(shaped(reference), shaped(truth))
    json.dumps(b, allow_nan=False)
    assert b["dtype"] == "float32" and b["shape"] == [100, 100]
    assert b["truth_dtype"] == "float64" and b["truth_is_reference"] is False
    assert b["truth_scale"] == pytest.approx(truth.pow(2).mean().sqrt().item(), rel=1e-12)
    assert b["reference_scale"] == pytest.approx(
        reference.double().pow(2).mean().sqrt().item(), rel=1e-12
    )
    vs = b["vs_truth"]
    assert vs["figures"]["elements_over"] == 0  # the baseline pass has no elementwise tolerance
    assert vs["figures"]["normwise_rel"] == pytest.approx(
        ((reference.double() - truth).norm() / truth.norm()).item(), rel=1e-12
    )
    assert vs["figures"]["scale"] == b["truth_scale"]

    alone = kn.describe_output(shaped(reference), shaped(reference))
    assert alone["truth_is_reference"] is True and alone["vs_truth"] is None
    assert alone["truth_scale"] == alone["reference_scale"] == b["reference_scale"]

    labels = torch.tensor([[0, 1], [2, 3]], dtype=torch.int64)
    tied = torch.tensor([[0, 1], [2, 2]], dtype=torch.int64)
    exact = kn.describe_output(shaped(labels), shaped(tied))
    assert exact["vs_truth"]["figures"]["elements_over"] == 1
    assert exact["vs_truth"]["worst"] == 3
    with pytest.raises(ValueError, match="shape"):
        kn.describe_output(shaped(reference), shaped(truth.flatten()))


VERIFIED_POLICY = json.dumps(
    {"kind": "scaled", "norm_floor": 1e-3, "elem_floor": 1e-2, "baseline_multiplier": 4.0,
     "sens_multiplier": 16.0, "admit_reference_excess": True}
)  # fmt: skip


def test_describe_output_measures_the_reference_against_its_candidates_budget():
    truth = sample(torch.float64, 10_000, seed=5).reshape(100, 100)
    scale = truth.pow(2).mean().sqrt().item()
    spiky = truth.clone()
    spiky[3, 3] += 0.05 * (truth[3, 3].abs() + scale)  # 5x the floor's 1e-2
    reference = spiky.to(torch.float32)
    # Without a policy: not measured (allclose protocols, older orchestrators).
    assert kn.describe_output(shaped(reference), shaped(truth))["vs_budget"] is None
    b = kn.describe_output(shaped(reference), shaped(truth), 0, None, VERIFIED_POLICY)
    over = b["vs_budget"]["figures"]
    assert over["elements_over"] == 1 and over["budget_ratio"] == pytest.approx(5.0, rel=1e-5)
    assert b["vs_budget"]["worst"] == 303
    # The element's sensitivity opens its budget (16 x 1% of its scale > 5%): nothing over.
    sens = torch.zeros(100, 100, dtype=torch.float32)
    sens[3, 3] = 0.01 * (truth[3, 3].abs() + scale)
    opened = kn.describe_output(shaped(reference), shaped(truth), 0, operand(sens), VERIFIED_POLICY)
    assert opened["vs_budget"]["figures"]["elements_over"] == 0
    # No float64 run, or an integer output: nothing to measure.
    alone = kn.describe_output(shaped(reference), shaped(reference), 0, None, VERIFIED_POLICY)
    assert alone["vs_budget"] is None
    with pytest.raises(ValueError, match="policy"):
        kn.describe_output(shaped(reference), shaped(truth), 0, None, "{not json")


def test_measure_rejects_bad_operands():
    x = torch.zeros(4)
    with pytest.raises(ValueError, match="numel"):
        kn.measure(operand(x), operand(torch.zeros(5)), spec())
    with pytest.raises(ValueError, match="same device"):
        kn.measure(operand(x), (x.data_ptr(), "float32", 4, 0), spec())
    with pytest.raises(ValueError, match="unknown dtype"):
        kn.measure((x.data_ptr(), "float8", 4, -1), operand(x), spec())
    with pytest.raises(ValueError, match="spec lacks"):
        kn.measure(operand(x), operand(x), {"threshold": 1.0})
    with pytest.raises(ValueError, match="not a number"):
        kn.measure(operand(x), operand(x), {**spec(), "scale": "lots"})
    with pytest.raises(ValueError):
        kn.measure((x.data_ptr(), "float32"), operand(x), spec())


class _NativeThatRunsOut:
    """kbv_native whose first `fail` SharedArena calls run out of device memory as the driver
    says it (or fail otherwise, with `message`)."""

    def __init__(self, fail: int, message: str = "CUDA_ERROR_OUT_OF_MEMORY: out of memory"):
        self.calls: list[tuple[int, int]] = []
        self.fail, self.message = fail, message

    def SharedArena(self, nbytes: int, device: int):  # noqa: N802 - kbv_native's name
        self.calls.append((nbytes, device))
        if len(self.calls) <= self.fail:
            raise RuntimeError(f"kbv_native: cuMemCreate failed: {self.message}")
        return f"arena of {nbytes}"


def _torch_cache(monkeypatch) -> list[str]:
    """torch.cuda's cache calls, recorded instead of made (no GPU is needed to follow them)."""
    made: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: made.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: made.append("empty_cache"))
    return made


def test_a_device_arena_that_ran_out_is_tried_again_with_torchs_cache_emptied(monkeypatch):
    from kbv import shared

    fake, made = _NativeThatRunsOut(fail=1), _torch_cache(monkeypatch)
    monkeypatch.setattr(shared, "native", lambda: fake)
    assert shared.new_arena(4096, torch.device("cuda", 1)) == "arena of 4096"
    assert fake.calls == [(4096, 1), (4096, 1)]
    assert made == ["synchronize", "empty_cache"]


def test_an_arena_is_tried_once_more_only_and_only_for_the_devices_out_of_memory(monkeypatch):
    from kbv import shared

    made = _torch_cache(monkeypatch)
    twice = _NativeThatRunsOut(fail=2)  # the cache held nothing that helped: the fault stands
    monkeypatch.setattr(shared, "native", lambda: twice)
    with pytest.raises(RuntimeError, match="OUT_OF_MEMORY"):
        shared.new_arena(4096, torch.device("cuda", 0))
    assert len(twice.calls) == 2 and made == ["synchronize", "empty_cache"]

    made.clear()
    other = _NativeThatRunsOut(fail=1, message="CUDA_ERROR_INVALID_VALUE: invalid argument")
    monkeypatch.setattr(shared, "native", lambda: other)
    with pytest.raises(RuntimeError, match="INVALID_VALUE"):
        shared.new_arena(4096, torch.device("cuda", 0))
    assert len(other.calls) == 1 and made == []

    host = _NativeThatRunsOut(fail=1, message="memfd: out of memory (CUDA_ERROR_OUT_OF_MEMORY)")
    monkeypatch.setattr(shared, "native", lambda: host)
    with pytest.raises(RuntimeError):  # torch's cache is the device's: nothing to give back
        shared.new_arena(4096, torch.device("cpu"))
    assert len(host.calls) == 1 and made == []


# ---- GPU twins --------------------------------------------------------------------------------


def host_and_device_agree(host: dict, device: dict):
    assert device["worst"] == host["worst"]
    assert device["first_nonfinite_mismatch"] == host["first_nonfinite_mismatch"]
    for key in ("x_at_worst", "y_at_worst", "x_at_first_nonfinite", "y_at_first_nonfinite"):
        assert str(device[key]) == str(host[key])
    for key in ("numel", "elements_over", "nonfinite_mismatches", "max_abs"):
        assert device["figures"][key] == host["figures"][key], key
    # The scale is a sum over the elements: the device adds them in another order (seen on the
    # H200: 9.990486289093308 against 9.990486289093319).
    assert decoded(device["figures"]["scale"]) == pytest.approx(
        decoded(host["figures"]["scale"]), rel=1e-12
    )
    for key in ("max_rel", "worst_elem_ratio", "normwise_rel"):
        assert decoded(device["figures"][key]) == pytest.approx(
            decoded(host["figures"][key]), rel=1e-12
        ), key


@needs_gpu
def test_gpu_arena_import_across_a_separate_process():
    a = kn.SharedArena(5 * MIB + 3, 0)
    assert a.device == 0 and a.capacity >= a.nbytes and a.capacity % (2 * MIB) == 0
    mine = torch.from_dlpack(a.view(0, "float32", [1024]))
    assert mine.device == torch.device("cuda", 0) and mine.eq(0).all()
    mine.copy_(torch.arange(1024, dtype=torch.float32, device="cuda"))
    torch.cuda.synchronize()
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = a.export_fd()
    socket.send_fds(parent_end, [b"arena"], [fd])
    os.close(fd)
    child = run_child(
        f"""
        import os, socket
        s = socket.socket(fileno={child_end.fileno()})
        _, fds, _, _ = socket.recv_fds(s, 16, 1)
        b = kn.SharedArena.open(fds[0], {a.nbytes}, 0)
        os.close(fds[0])
        seen = torch.from_dlpack(b.view(0, "float32", [1024]))
        assert seen[1023].item() == 1023.0
        torch.from_dlpack(b.view(8192, "bfloat16", [16])).fill_(2.5)
        torch.cuda.synchronize()
        b.close()
        print("ok")
        """,
        pass_fds=[child_end.fileno()],
    )
    child_end.close()
    parent_end.close()
    assert child.returncode == 0, child.stderr
    assert torch.from_dlpack(a.view(8192, "bfloat16", [16])).eq(2.5).all()
    a.close()


@needs_gpu
@pytest.mark.parametrize("name", DTYPES)
def test_gpu_every_dtype_and_bounds(name):
    dtype = DTYPES[name]
    with kn.SharedArena(1 << 16, 0) as a:
        view = torch.from_dlpack(a.view(64, name, [4, 8]))
        assert view.dtype == dtype and view.is_cuda and view.data_ptr() == a.ptr + 64
        values = sample(dtype, 32, seed=4, device="cuda").reshape(4, 8)
        view.copy_(values)
        assert torch.equal(torch.from_dlpack(a.view(64, name, [32])), values.flatten())
        with pytest.raises(IndexError):
            a.view(1 << 16, name, [1])
        del view


@needs_gpu
def test_gpu_revoke_faults_later_access_and_keeps_the_range():
    a = kn.SharedArena(4 * MIB, 0)
    fd = a.export_fd()
    child = run_child(
        f"""
        b = kn.SharedArena.open({fd}, {a.nbytes}, 0)
        view = torch.from_dlpack(b.view(0, "float32", [1024]))
        view.fill_(1.0)
        torch.cuda.synchronize()
        ptr, capacity = b.ptr, b.capacity
        b.revoke(); b.revoke(); b.close()
        later = [kn.SharedArena(4 * (1 << 20), 0) for _ in range(4)]
        assert all(c.ptr + c.capacity <= ptr or c.ptr >= ptr + capacity for c in later)
        print("revoked", flush=True)
        view.fill_(2.0)
        torch.cuda.synchronize()
        print("survived", flush=True)
        """,
        pass_fds=[fd],
    )
    os.close(fd)
    assert "revoked" in child.stdout and "survived" not in child.stdout, child.stderr
    assert child.returncode != 0
    assert torch.from_dlpack(a.view(0, "float32", [1024])).eq(1.0).all()  # the parent is fine
    a.close()


@needs_gpu
def test_gpu_close_releases_device_memory():
    torch.cuda.synchronize()
    free_before, _ = kn.cuda_mem_get_info()
    a = kn.SharedArena(1 << 30, 0)
    free_during, _ = kn.cuda_mem_get_info()
    assert free_before - free_during >= (1 << 30)
    a.close()
    free_after, _ = kn.cuda_mem_get_info()
    assert free_after >= free_during + (1 << 30)


@needs_gpu
def test_gpu_a_block_is_made_from_memory_torchs_cache_held():
    """Device memory torch's caching allocator holds freed is the driver's to give only once the
    cache lets go of it: a block larger than what the driver has free, with the rest in torch's
    cache, is made (shared.new_arena) and the cache is emptied for it."""
    from kbv import shared

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free, _ = kn.cuda_mem_get_info()
    filler = torch.empty(free - (3 << 29), dtype=torch.uint8, device="cuda")  # 1.5 GiB left
    del filler  # freed into torch's cache, not to the driver
    assert torch.cuda.memory_reserved() >= free - (3 << 29)
    arena = shared.new_arena(4 << 30, torch.device("cuda", 0))
    try:
        assert torch.cuda.memory_reserved() < free - (3 << 29)
        assert kn.cuda_mem_get_info()[0] < free - (4 << 30) + (1 << 30)
    finally:
        arena.close()


@needs_gpu
@pytest.mark.parametrize("name", DTYPES)
def test_gpu_measure_equals_host_measure(name):
    dtype = DTYPES[name]
    n = 1_000_003
    truth = sample(torch.float64, n, seed=7)
    x = (truth + 0.05 * sample(torch.float64, n, seed=8)).to(dtype)
    if dtype.is_floating_point:
        x[[5, 99, 70_000]] = torch.tensor([NAN, INF, -INF], dtype=torch.float64).to(dtype)
        truth[[99, 123_456]] = torch.tensor([INF, 1e39], dtype=torch.float64)
    threshold = THRESHOLDS.get(name, "inf")
    for nan_equal in (True, False):
        s = spec(threshold=threshold, scale=10.0, tol_abs=0.1, tol_rel=0.01, nan_equal=nan_equal)
        for y in (truth, truth.to(dtype)):
            host = kn.measure(operand(x), operand(y), s)
            # Held by names: a temporary's memory goes back to torch's cache as soon as its
            # pointer is taken, and the next .cuda() may get the same block.
            x_gpu, y_gpu = x.cuda(), y.cuda()
            device = kn.measure(operand(x_gpu), operand(y_gpu), s)
            host_and_device_agree(host, device)
    # With a sensitivity operand (float32, as the worker keeps it) opening some budgets.
    sens = (0.05 * sample(torch.float64, n, seed=9).abs()).to(torch.float32)
    opened = spec(threshold=threshold, scale=10.0, tol_abs=0.1, tol_rel=0.01, sens=16.0)
    host = kn.measure(operand(x), operand(truth), opened, 0, operand(sens))
    x_gpu, y_gpu, s_gpu = x.cuda(), truth.cuda(), sens.cuda()
    device = kn.measure(operand(x_gpu), operand(y_gpu), opened, 0, operand(s_gpu))
    host_and_device_agree(host, device)
    assert str(device["s_at_worst"]) == str(host["s_at_worst"])
    # Bit for bit: the device pass is compiled without contracting a * b + c into one rounding
    # (--fmad=false), as the host computes it.
    assert decoded(device["figures"]["budget_ratio"]) == decoded(host["figures"]["budget_ratio"])
    rms_host = kn.finite_rms(operand(truth), threshold)
    truth_gpu, x_gpu = truth.cuda(), x.cuda()
    assert kn.finite_rms(operand(truth_gpu), threshold) == pytest.approx(rms_host, rel=1e-12)
    b_host = kn.describe_output(shaped(x), shaped(truth))
    b_device = kn.describe_output(shaped(x_gpu), shaped(truth_gpu))
    assert b_device["truth_scale"] == pytest.approx(b_host["truth_scale"], rel=1e-12)
    host_and_device_agree(b_host["vs_truth"], b_device["vs_truth"])
    if dtype.is_floating_point:  # the reference against its candidates' budget, on the device
        b_host = kn.describe_output(shaped(x), shaped(truth), 0, operand(sens), VERIFIED_POLICY)
        b_device = kn.describe_output(
            shaped(x_gpu), shaped(truth_gpu), 0, operand(s_gpu), VERIFIED_POLICY
        )
        host_and_device_agree(b_host["vs_budget"], b_device["vs_budget"])


@needs_gpu
def test_gpu_measure_indexes_past_2_to_the_31():
    n = (1 << 31) + 1000
    x = torch.zeros(n, dtype=torch.float16, device="cuda")
    y = torch.zeros(n, dtype=torch.float16, device="cuda")
    x[(1 << 31) + 10] = 1.0
    x[(1 << 31) + 20] = INF
    m = kn.measure(operand(x), operand(y), spec(threshold=65520.0, tol_abs=0.1))
    assert m["figures"]["numel"] == n
    assert m["figures"]["elements_over"] == 1 and m["worst"] == (1 << 31) + 10
    assert m["figures"]["nonfinite_mismatches"] == 1
    assert m["first_nonfinite_mismatch"] == (1 << 31) + 20
    assert m["x_at_worst"] == 1.0 and m["x_at_first_nonfinite"] == "inf"
    del x, y
    torch.cuda.empty_cache()


@needs_gpu
def test_gpu_checksum_of_a_multi_gigabyte_buffer():
    nbytes = 3 * (1 << 30) + 5
    data = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device="cuda")
    key = 0xC0FFEE
    device = kn.checksum(data.data_ptr(), nbytes, 0, key)
    host_copy = data.cpu()
    assert device == kn.checksum(host_copy.data_ptr(), nbytes, -1, key)
    assert kn.checksum(data.data_ptr() + 1, nbytes - 1, 0, key) == kn.checksum(
        host_copy.data_ptr() + 1, nbytes - 1, -1, key
    )  # unaligned
    data[nbytes - 2] ^= 1
    assert kn.checksum(data.data_ptr(), nbytes, 0, key) != device
    assert kn.checksum(data.data_ptr(), nbytes, 0, key + 1) != device
    del data, host_copy
    torch.cuda.empty_cache()


@needs_gpu
def test_gpu_checksums_of_many_buffers_match_the_host_and_one_by_one():
    """A state of hundreds of tensors checksummed with one wait: each sum is the one the buffer
    alone gives, on the device and on the host, an empty and an unaligned buffer among them."""
    key = 0xFEED
    data = [torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
            for n in [0, 3, 8, 4099, 1 << 20] + [64] * 600]  # fmt: skip
    listed = [(t.data_ptr(), t.numel()) for t in data] + [(data[3].data_ptr() + 1, 4098)]
    on_device = kn.checksums(listed, 0, key)
    assert on_device == [kn.checksum(p, n, 0, key) for p, n in listed]
    host = [t.cpu() for t in data]
    expected = [kn.checksum(t.data_ptr(), t.numel(), -1, key) for t in host]
    expected.append(kn.checksum(host[3].data_ptr() + 1, 4098, -1, key))
    assert on_device == expected
    data[4][17] ^= 1
    assert kn.checksums(listed, 0, key)[4] != on_device[4]


@needs_gpu
def test_gpu_a_block_made_with_values_is_complete_when_handed_over():
    """Another process that maps a block sees none of this stream's ordering: `allocate`
    returns only once its copies are done. Queued behind a 50 ms device sleep, the copy would
    still be pending at return without the wait (a fresh 17 GB copy read half-written by a
    candidate was a `nondeterministic` reject, session 11)."""
    from kbv import shared

    values = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    torch.cuda._sleep(100_000_000)  # about 50 ms of device time on the current stream
    block = shared.allocate([values], torch.device("cuda", 0))
    try:
        assert torch.cuda.current_stream().query()
        assert torch.equal(block.as_list()[0], values)
    finally:
        block.close()
