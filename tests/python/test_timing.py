"""The worker's timing (python/kbv/timing.py) where it runs without a GPU: per-sample throttle
classification, steady-clock warm-up, CPU timing, secondary figures, and the CUDA sample loop
against a fake kbv_native; then `kbv eval --profile` end to end on the CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import import_native_or_skip_module  # noqa: E402

import_native_or_skip_module()

from kbv import timing  # noqa: E402

CPU = torch.device("cpu")
HW_SLOWDOWN, SW_POWER_CAP, SW_THERMAL, GPU_IDLE = 0x8, 0x4, 0x20, 0x1


def test_classify_takes_the_union_of_both_reads_and_ignores_failed_queries():
    assert timing.classify_sample((1980, GPU_IDLE), (1755, SW_POWER_CAP)) == (
        GPU_IDLE | SW_POWER_CAP,
        1980,
    )
    assert timing.classify_sample((-1, -1), (1500, HW_SLOWDOWN)) == (HW_SLOWDOWN, 1500)
    assert timing.classify_sample((-1, -1), (-1, -1)) == (0, -1)


def test_slowdown_samples_are_discarded_power_capped_ones_kept_and_counted():
    tally = timing.ThrottleTally(max_retries=2)
    assert tally.keep(0, 1980)
    assert tally.keep(SW_POWER_CAP, 1470)  # the normal state of heavy work: kept
    assert not tally.keep(HW_SLOWDOWN, 1200)
    assert not tally.keep(SW_THERMAL, 1300)
    # Retries exhausted: the sample is kept and the report says so.
    assert tally.keep(HW_SLOWDOWN, 1100)
    report = tally.report()
    assert report["kept"] == 3 and report["discarded"] == 2
    assert report["power_capped"] == 1
    assert report["retries_exhausted"] is True
    assert report["discarded_reasons"] == {"hw_slowdown": 1, "sw_thermal": 1}
    assert report["reasons"] == {"sw_power_cap": 1, "hw_slowdown": 1}
    assert report["sm_clock_mhz"] == [1980, 1470, 1100]


def test_honest_clocks_discard_nothing():
    tally = timing.ThrottleTally(max_retries=5)
    for _ in range(10):
        assert tally.keep(GPU_IDLE, 1980)
    report = tally.report()
    assert report["discarded"] == 0 and report["power_capped"] == 0
    assert not report["retries_exhausted"]


def test_steady_warmup_stops_when_successive_medians_agree():
    medians = iter([5.0, 3.0, 2.0, 2.01, 2.0, 2.0])
    seen = []

    def sample(n):
        seen.append(n)
        return [next(medians)] * n

    info = timing.steady_warmup(sample, batch=4)
    assert info["steady"] is True
    assert info["batches"] == 4  # 5 -> 3 -> 2 -> 2.01: steady at the fourth
    assert info["medians_ms"] == [5.0, 3.0, 2.0, 2.01]
    assert seen == [4, 4, 4, 4]


def test_steady_warmup_is_bounded_when_clocks_never_settle():
    values = iter(range(1, 1000))
    info = timing.steady_warmup(lambda n: [float(next(values))] * n, max_batches=6)
    assert info["steady"] is False and info["batches"] == 6


def test_cpu_time_calls_reports_throttle_not_applicable_and_warmup():
    calls = []
    result = timing.time_calls(lambda i: calls.append(i), CPU, 5, 2, steady=True)
    assert len(result["samples_ms"]) == 5
    assert result["method"] == "cpu_steady_clock"
    assert result["throttle"] == {"status": "not_applicable"}
    assert result["warmup"]["batches"] >= 2
    plain = timing.time_calls(lambda i: None, CPU, 3, 1)
    assert "warmup" not in plain and len(plain["samples_ms"]) == 3


def test_cpu_secondary_figures():
    x = torch.randn(256, 256)
    result = timing.secondary_times(lambda i: x @ x, CPU, 4)
    assert len(result["hot_ms"]) == 4
    assert all(v > 0 for v in result["host_inclusive_ms"] + result["hot_ms"])
    assert 1 <= result["hot_batch"] <= 100
    # The matmul takes well under a millisecond on an idle machine and tens of ms on a loaded
    # CI runner: batched, or a batch of its own paired with the host-inclusive calls after the
    # first (one host-inclusive call more, so that each figure has the 4 asked for).
    if result["hot_batch"] > 1:
        assert result["hot_method"] == "cpu_back_to_back"
        # Four, or five where a slow first call (a batch of its own) started the pairing and the
        # median of the calls after it, fast, undid it (CI, 2026-12-06: 1.6 ms, then 0.3 ms).
        host = result["host_inclusive_ms"]
        assert len(host) == 4 or (len(host) == 5 and timing._hot_batch(host[0]) == 1), host
    elif timing._hot_batch(result["host_inclusive_ms"][0]) == 1:
        # The first call was slow: paired from the second call on.
        assert result["hot_method"] == "cpu_per_host_inclusive_call"
        assert len(result["host_inclusive_ms"]) == 5
    else:
        # A fast first call (no pairing) and slow calls after it, the runner loaded meanwhile
        # (CI, 2026-12-07): the median asks batches of one, timed back to back.
        assert result["hot_method"] == "cpu_back_to_back"
        assert len(result["host_inclusive_ms"]) == 4


def test_secondary_figures_of_a_slow_forward_stop_at_their_budget():
    """A forward of 60 ms gets the minimum of calls per figure, not the 20 asked (the figures
    are not judged and the device is held exclusively meanwhile), and runs once for both: it is
    a hot batch of its own, so the host-inclusive calls after the first give the hot figure. A
    fast one gets all 20 of each, the hot ones in batches of their own."""
    import time as clock

    slow_calls = []

    def slow(i):
        slow_calls.append(i)
        clock.sleep(0.06)

    result = timing.secondary_times(slow, CPU, 20)
    assert len(result["host_inclusive_ms"]) == timing.SECONDARY_MIN_CALLS + 1
    assert len(result["hot_ms"]) == timing.SECONDARY_MIN_CALLS
    assert result["hot_batch"] == 1  # about 2 ms a batch: one call already exceeds it
    assert result["hot_method"] == "cpu_per_host_inclusive_call"
    assert len(slow_calls) == timing.SECONDARY_MIN_CALLS + 1  # was twice the minimum
    # Each hot time is the call inside its host-inclusive bracket: no longer, and the sleep.
    for hot, host in zip(result["hot_ms"], result["host_inclusive_ms"][1:], strict=True):
        assert 60 <= hot <= host
    fast = timing.secondary_times(lambda i: None, CPU, 20)
    assert len(fast["host_inclusive_ms"]) == 20 and len(fast["hot_ms"]) == 20
    assert fast["hot_method"] == "cpu_back_to_back" and fast["hot_batch"] > 1


def test_a_slow_first_secondary_call_does_not_make_a_fast_forward_a_batch_of_one():
    """The pairing is decided on the first call; a first call that was slow (a cache filled, a
    lazy initialisation) while the forward is fast leaves the median's batch over one, and the
    hot figure is timed in its own batches as before."""
    import time as clock

    calls = []

    def first_slow(i):
        calls.append(i)
        if len(calls) == 1:
            clock.sleep(0.01)

    result = timing.secondary_times(first_slow, CPU, 10)
    # Paired after the first call, so one host-inclusive call more than the 10 asked for.
    assert len(result["host_inclusive_ms"]) == 11
    assert result["host_inclusive_ms"][0] >= 10
    assert result["hot_batch"] > 1 and result["hot_method"] == "cpu_back_to_back"
    assert len(result["hot_ms"]) == 10
    assert len(calls) == 11 + 10 * result["hot_batch"]


# -- the CUDA sample loop, against a fake kbv_native (no GPU needed) --------------------------
class FakeNative:
    """time_cuda and nvml_clocks as the loop sees them: `reads` are the NVML answers in order
    (two a sample), `synchronizes` makes every blocked call time out."""

    def __init__(self, reads=None, synchronizes=False, nvml=True):
        self.reads = iter(reads or [])
        self.synchronizes = synchronizes
        self.nvml = nvml
        self.calls: list[tuple[int, int, bool]] = []
        self.indices: list[int] = []
        self._decode_throttle_reasons = timing.kbv_native._decode_throttle_reasons

    def time_cuda(self, fn, calls, warmup, stream, flush_l2=True, block=True):
        self.calls.append((calls, warmup, block))
        for i in range(warmup):
            self.indices.append(i)
            fn(i)
        samples, timeouts = [], 0
        for k in range(calls):
            fn(warmup + k)
            if block and self.synchronizes:
                samples.append(2000.0)
                timeouts += 1
                break
            samples.append(1.0 if block else 1.5)
        return {"samples_ms": samples, "block_timeouts": timeouts}

    def nvml_clocks(self, index):
        if not self.nvml:
            raise RuntimeError("NVML is not available: no libnvidia-ml.so.1")
        return next(self.reads, (1980, 0))


@pytest.fixture
def fake_cuda(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr(
        torch.cuda, "current_stream", lambda device=None: SimpleNamespace(cuda_stream=0)
    )
    monkeypatch.setattr(timing, "_synchronizes", False)

    def install(fake):
        monkeypatch.setattr(timing, "kbv_native", fake)
        return fake

    return install


CUDA0 = torch.device("cuda", 0)


def test_cuda_loop_retakes_slowdown_samples_and_counts_power_cap(fake_cuda):
    reads = [(345, GPU_IDLE)]  # ClockProbe's check that NVML answers
    reads += [(1980, GPU_IDLE), (1980, GPU_IDLE)]  # sample 1: clean
    reads += [(1500, HW_SLOWDOWN), (1500, 0)]  # sample 2: discarded, retaken
    reads += [(1470, SW_POWER_CAP), (1470, SW_POWER_CAP)]  # kept, power-capped
    reads += [(1980, 0), (1980, 0)]
    fake = fake_cuda(FakeNative(reads))
    seen = []
    result = timing.time_calls(lambda i: seen.append(i), CUDA0, 3, 2)
    assert result["samples_ms"] == [1.0, 1.0, 1.0]
    assert result["method"] == "cuda_events_blocked_cold_l2"
    t = result["throttle"]
    assert t["status"] == "ok" and t["kept"] == 3 and t["discarded"] == 1
    assert t["discarded_reasons"] == {"hw_slowdown": 1}
    assert t["power_capped"] == 1
    assert t["sm_clock_mhz"] == [1980, 1470, 1980]
    # Warm-up first, then one call a sample, the call index running on across samples.
    assert fake.calls[0] == (0, 2, True)
    assert all(c == (1, 0, True) for c in fake.calls[1:])
    assert seen == list(range(6))


def test_cuda_loop_times_a_synchronising_forward_unblocked_and_remembers(fake_cuda):
    fake = fake_cuda(FakeNative(synchronizes=True))
    result = timing.time_calls(lambda i: None, CUDA0, 4, 1)
    assert result["samples_ms"] == [1.5] * 4
    assert result["synchronizes_internally"] is True
    assert result["method"] == "cuda_events_unblocked_cold_l2"
    assert fake.calls[1][2] is True  # the first sample tried the blocker once
    # The next request of this worker starts unblocked: no second time-out.
    fake.calls.clear()
    again = timing.time_calls(lambda i: None, CUDA0, 2, 0)
    assert again["samples_ms"] == [1.5, 1.5]
    assert all(block is False for _, _, block in fake.calls)


def test_cuda_loop_without_nvml_says_why(fake_cuda):
    fake_cuda(FakeNative(nvml=False))
    result = timing.time_calls(lambda i: None, CUDA0, 5, 0, steady=True)
    assert result["samples_ms"] == [1.0] * 5
    assert result["throttle"]["status"] == "unavailable"
    assert "libnvidia-ml" in result["throttle"]["why"]
    assert result["warmup"]["steady"] is True


def test_honest_cuda_loop_discards_nothing(fake_cuda):
    fake_cuda(FakeNative([(1980, GPU_IDLE)] * 20))
    result = timing.time_calls(lambda i: None, CUDA0, 10, 0)
    assert len(result["samples_ms"]) == 10
    assert result["throttle"]["discarded"] == 0 and result["throttle"]["power_capped"] == 0


# -- end to end: `kbv eval --profile` on the CPU ---------------------------------------------
@pytest.mark.e2e
def test_eval_with_a_profile_times_adaptively_and_reports_every_figure(tmp_path, cache_dir):
    import json
    import subprocess

    from conftest import CPU_CANDIDATES, PROBLEMS, kbv_binary

    out = tmp_path / "result.json"
    rel = "level1/3_ReLU.py"
    command = [kbv_binary(), "eval", "-p", str(PROBLEMS / rel), "-c", str(CPU_CANDIDATES / rel)]
    command += ["--device", "cpu", "--draws", "1", "--profile", "quick", "--quiet"]
    command += ["--cache-dir", str(cache_dir), "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    timing = result["timing"]
    assert timing["plan"]["adaptive"] is True
    assert timing["plan"]["profile"]["name"] == "quick"
    assert timing["stop_reason"] in ("precise", "max_samples", "budget")
    n = timing["candidate"]["n"]
    assert 5 <= n <= 50 and n % 5 == 0  # quick: 5 calls a round, 5 to 50 samples
    assert timing["baseline_tf32"]["n"] == n == timing["baseline_fp32"]["n"]
    for side in ("candidate", "baseline_tf32", "baseline_fp32"):
        assert timing[side]["throttle"]["status"] == "not_applicable"
        assert timing[side]["host_inclusive"]["n"] == 10
        assert timing[side]["hot"]["n"] == 10
        assert "kernel_audit" not in timing[side]
        assert timing["warmup"][side]["batches"] >= 2
    assert {"timing", "memory"} <= set(result["durations_s"])
    assert result["memory"]["partial"] is False

    # An unknown profile is a usage error, not a verdict.
    bad = subprocess.run(command[:-2] + ["--profile", "sloppy"], capture_output=True, text=True)
    assert bad.returncode != 0 and "sloppy" in bad.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_secondary_figures_pair_a_slow_forward_and_batch_a_fast_one():
    """The GPU twin of the pairing: a forward of a few ms (a spinning kernel) gets its hot
    figure from events around its host-inclusive calls, each within its host bracket; a tiny
    forward's hot figure is timed back to back in batches."""
    gpu = torch.device("cuda")
    x = torch.ones(1024, device=gpu)
    torch.cuda._sleep(1000)  # loads the kernel
    cycles = int(torch.cuda.get_device_properties(gpu).clock_rate * 3)  # kHz: about 3 ms

    def slow(i):
        torch.cuda._sleep(cycles)
        return x + 1

    paired = timing.secondary_times(slow, gpu, 8)
    assert paired["hot_method"] == "cuda_events_per_host_inclusive_call_warm_l2"
    assert paired["hot_batch"] == 1
    for hot, host in zip(paired["hot_ms"], paired["host_inclusive_ms"][1:], strict=True):
        assert 1.0 < hot <= host * 1.01
    fast = timing.secondary_times(lambda i: x + 1, gpu, 8)
    assert fast["hot_method"] == "cuda_events_back_to_back_warm_l2" and fast["hot_batch"] > 1
    assert len(fast["hot_ms"]) == 8
