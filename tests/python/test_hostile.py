"""Hostile candidates against the sandbox, end to end on the CPU: each one ends as a verdict
with its reason, kbv completes, and nothing outside the candidate's own folders changes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import PROBLEMS, QUICK, REPO, kbv_binary

RELU = PROBLEMS / "level1" / "3_ReLU.py"

HEADER = "import os\nimport torch\nfrom torch import nn\n\n"
HONEST_FORWARD = """
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


# These candidates are plain PyTorch on purpose (the sandbox is on trial here, not whose code
# computes): every evaluation accepts PyTorch rewrites, so no_custom_kernel is only a warning.
ALLOW_LIBRARY = "--allow-library"


@pytest.fixture
def run_eval(run_eval):
    def run(problem, candidate, *extra, **kwargs):
        return run_eval(problem, candidate, ALLOW_LIBRARY, *extra, **kwargs)

    return run


def candidate(tmp_path, name, body, forward=HONEST_FORWARD):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body) + forward)
    return path


def require_isolation(evaluation):
    isolation = evaluation.result["isolation"]
    if not str(isolation.get("namespaces", "")).startswith(("privileged", "user_namespace")):
        pytest.skip(f"this machine refuses namespaces: {isolation.get('namespaces')}")
    return isolation


@pytest.mark.e2e
def test_isolation_report_of_an_honest_candidate(tmp_path, run_eval):
    evaluation = run_eval(RELU, candidate(tmp_path, "honest", ""))
    isolation = require_isolation(evaluation)
    assert evaluation.verdict == "correct"
    for layer in ("network_isolated", "read_only_root", "pid_namespace", "capabilities_dropped"):
        assert isolation[layer] is True, layer
    assert isolation["private_root"]["done"] is True


@pytest.mark.e2e
def test_writes_outside_scratch_change_nothing(tmp_path, run_eval, cache_dir):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("untouched")
    problem_copy = tmp_path / "problem.py"
    problem_copy.write_text(RELU.read_text())
    targets = [str(sentinel), str(problem_copy), str(cache_dir / "planted.txt")]
    body = f"""
    BLOCKED = []
    for target in {targets!r}:
        try:
            with open(target, "w") as handle:
                handle.write("tampered")
        except OSError as error:
            BLOCKED.append(error.errno)
    """
    evaluation = run_eval(problem_copy, candidate(tmp_path, "writer", body))
    require_isolation(evaluation)
    assert evaluation.returncode == 0
    assert sentinel.read_text() == "untouched"
    assert problem_copy.read_text() == RELU.read_text()
    assert not (cache_dir / "planted.txt").exists()
    assert evaluation.verdict == "correct"  # the writes failed; the kernel itself is honest


@pytest.mark.e2e
def test_network_is_unreachable(tmp_path, run_eval):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:  # closed or timed out: nothing connected
            pass

    server.settimeout(60)
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    body = f"""
    import socket
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as s:
        s.sendall(b"leak")
    """
    evaluation = run_eval(RELU, candidate(tmp_path, "network", body))
    require_isolation(evaluation)
    server.close()
    assert not accepted
    assert evaluation.verdict == "compile_error"  # the connection raised at import
    assert "OSError" in evaluation.result["reason"] or "Network" in evaluation.result["reason"]


@pytest.mark.e2e
def test_golden_outputs_and_other_runs_are_out_of_sight(tmp_path, run_eval):
    """The golden outputs live only in the reference's memory (docs/case-path.md), and the
    reference's run folder (its log) and process are out of the candidate's sight."""
    body = """
    import glob
    SEEN = glob.glob("/tmp/kbv-runs/kbv-run-*") + glob.glob("/tmp/kbv-runs/*/reference.log")
    OTHERS = [
        p for p in glob.glob("/proc/[0-9]*/cmdline")
        if b"--role\\x00reference" in open(p, "rb").read()
    ]
    assert not SEEN and not OTHERS, (SEEN, OTHERS)
    """
    evaluation = run_eval(RELU, candidate(tmp_path, "peeker", body))
    require_isolation(evaluation)
    assert evaluation.verdict == "correct", evaluation.result["reason"]


@pytest.mark.e2e
def test_killing_the_parent_only_kills_the_candidate(tmp_path, run_eval):
    forward = """
class ModelNew(nn.Module):
    def forward(self, x):
        import signal
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(-1, signal.SIGKILL)
        return torch.relu(x)
"""
    evaluation = run_eval(RELU, candidate(tmp_path, "parricide", "", forward))
    require_isolation(evaluation)
    assert evaluation.returncode == 0
    assert evaluation.verdict == "runtime_error", evaluation.result["reason"]


@pytest.mark.e2e
def test_fork_bomb_is_contained(tmp_path, run_eval):
    forward = """
class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            try:
                if os.fork() == 0:
                    while True:
                        pass
            except OSError:
                pass
"""
    evaluation = run_eval(RELU, candidate(tmp_path, "bomb", "", forward), "--timeout", "10")
    require_isolation(evaluation)
    assert evaluation.returncode == 0
    assert evaluation.verdict == "timeout"


@pytest.mark.e2e
def test_host_memory_exhaustion_is_a_runtime_error(tmp_path, run_eval, monkeypatch):
    # A 4 GiB cap (KBV_HOST_MEMORY_BYTES) rather than the default 16 GiB: the candidate reaches it
    # in seconds, and the tests beside it on a small machine keep their memory.
    monkeypatch.setenv("KBV_HOST_MEMORY_BYTES", str(4 << 30))
    forward = """
class ModelNew(nn.Module):
    def forward(self, x):
        hoard = [bytearray(1 << 30) for _ in range(64)]
        return torch.relu(x) + len(hoard) * 0
"""
    evaluation = run_eval(RELU, candidate(tmp_path, "hoarder", "", forward))
    require_isolation(evaluation)
    assert evaluation.verdict == "runtime_error", (
        evaluation.result["reason"],
        evaluation.result["flags"],
    )
    assert "MemoryError" in evaluation.result["reason"]


@pytest.mark.e2e
def test_no_other_process_is_visible(tmp_path, run_eval):
    """The secret seed lives only in the reference worker's memory (never in a file, argv or
    the environment); the candidate cannot even see that process, nor the orchestrator."""
    body = """
    VISIBLE = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    assert VISIBLE == [os.getpid()], VISIBLE
    assert "KBV_SECRET" not in str(os.environ)
    """
    evaluation = run_eval(RELU, candidate(tmp_path, "seer", body))
    require_isolation(evaluation)
    assert evaluation.verdict == "correct", evaluation.result["reason"]


@pytest.mark.e2e
def test_multi_gb_outputs_cost_only_their_own_result(tmp_path, cache_dir):
    """5 GiB returned (allocated lazily, so the test itself stays cheap) is never copied: it is
    not the reference's dtype and shape, so it fails its case without a copy or a file; 64 GiB
    cannot even be allocated under the heap limit. Both end as a verdict with a reason, the
    honest candidate after them is evaluated, every row is in the store."""
    from test_run import kbv_run, rows

    folder = tmp_path / "cands" / "big"
    folder.mkdir(parents=True)
    for sample, gib in enumerate((5, 64)):
        forward = f"""
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty({gib} << 30, dtype=torch.uint8)
"""
        (folder / f"level_1_problem_3_sample_{sample}_kernel.py").write_text(HEADER + forward)
    (folder / "level_1_problem_3_sample_2_kernel.py").write_text(HEADER + HONEST_FORWARD)
    db = tmp_path / "big.sqlite"
    done = kbv_run(tmp_path / "cands", db, ALLOW_LIBRARY, cache_dir=cache_dir)
    assert done.returncode == 0, done.stderr
    assert [r[5] for r in rows(db)] == ["incorrect", "runtime_error", "correct"]
    import json
    import sqlite3

    with sqlite3.connect(db) as con:
        reasons = [
            json.loads(text)["reason"]
            for (text,) in con.execute("SELECT result_json FROM results ORDER BY sample")
        ]
    assert "dtype uint8 differs from the reference's float32" in reasons[0], reasons[0]
    assert "memory" in reasons[1].lower(), reasons[1]


SMALL_QUOTA = 64 << 20
FILLS_SCRATCH = REPO / "examples" / "wrong" / "fills_scratch.py"
SMALL_SCRATCH_FILE = """
class ModelNew(nn.Module):
    def forward(self, x):
        with open("kbv_scratch_note.bin", "wb") as handle:
            handle.write(os.urandom(1 << 20))
        with open(os.path.join(os.environ["TMPDIR"], "kbv_scratch_note.bin"), "rb") as handle:
            assert len(handle.read()) == 1 << 20
        return torch.relu(x)
"""


def scratch_quota_of(evaluation, sandboxed):
    """The quota as the isolation report records it: the sandbox's tmpfs when this machine
    allows mounts, else (or with --no-sandbox) the orchestrator's watchdog."""
    if sandboxed:
        require_isolation(evaluation)
    quota = evaluation.result["isolation"]["scratch_quota"]
    assert quota["bytes"] == SMALL_QUOTA
    assert quota["kind"] == ("tmpfs" if sandboxed else "watchdog"), quota
    if not sandboxed:
        assert quota["why_not_tmpfs"] == "the sandbox is disabled"
    return quota


@pytest.mark.e2e
@pytest.mark.parametrize("sandboxed", [True, False], ids=["tmpfs", "watchdog"])
def test_scratch_quota_ends_a_disk_filler(tmp_path, run_eval, monkeypatch, sandboxed):
    """Many files, each far under the per-file limit, until the total is over the quota: a
    runtime_error saying so, whichever way the quota is enforced."""
    monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(SMALL_QUOTA))
    extra = [] if sandboxed else ["--no-sandbox"]
    evaluation = run_eval(RELU, FILLS_SCRATCH, *extra)
    assert evaluation.returncode == 0, evaluation.stderr
    scratch_quota_of(evaluation, sandboxed)
    reason = evaluation.result["reason"]
    assert evaluation.verdict == "runtime_error", reason
    assert "scratch quota exceeded" in reason, reason
    if sandboxed:
        assert f"filled its scratch directory's {SMALL_QUOTA}-byte quota" in reason, reason
    else:
        assert f"over the {SMALL_QUOTA}-byte quota" in reason, reason
        written = int(reason.split("wrote ")[1].split(" bytes")[0])
        assert written > SMALL_QUOTA


@pytest.mark.e2e
@pytest.mark.parametrize("sandboxed", [True, False], ids=["tmpfs", "watchdog"])
def test_scratch_quota_spares_a_small_scratch_file(tmp_path, run_eval, monkeypatch, sandboxed):
    monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(SMALL_QUOTA))
    extra = [] if sandboxed else ["--no-sandbox"]
    evaluation = run_eval(RELU, candidate(tmp_path, "scratch_note", "", SMALL_SCRATCH_FILE), *extra)
    assert evaluation.returncode == 0, evaluation.stderr
    scratch_quota_of(evaluation, sandboxed)
    assert evaluation.verdict == "correct", evaluation.result["reason"]
    assert not evaluation.flag_ids("reject")


@pytest.mark.e2e
@pytest.mark.parametrize("sandboxed", [True, False], ids=["tmpfs", "watchdog"])
def test_scratch_quota_catches_a_background_writer(tmp_path, run_eval, monkeypatch, sandboxed):
    """A thread started at import fills the scratch folder beside the candidate's own work: the
    quota is checked while kbv waits on any worker, not only on the file the candidate returns.
    The import waits until a write has failed (the tmpfs full) or the watchdog's interval has
    passed, so the filling is over before the evaluation can end (under a loaded CI machine the
    thread once lost the race to a whole evaluation of the ReLU)."""
    monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(SMALL_QUOTA))
    body = """
    import threading
    import time

    _full = threading.Event()

    def _fill():
        index = 0
        while index < 512:  # 2 GiB at most, should the quota not hold
            try:
                with open(f"bg_{index}.bin", "wb") as handle:
                    handle.write(b"x" * (4 << 20))
            except OSError:
                _full.set()
                time.sleep(0.01)
            index += 1

    threading.Thread(target=_fill, daemon=True).start()
    _full.wait(5)
    """
    extra = [] if sandboxed else ["--no-sandbox"]
    evaluation = run_eval(RELU, candidate(tmp_path, "background_filler", body), *extra)
    assert evaluation.returncode == 0, evaluation.stderr
    scratch_quota_of(evaluation, sandboxed)
    assert evaluation.verdict == "runtime_error", evaluation.result["reason"]
    assert "scratch quota exceeded" in evaluation.result["reason"]


@pytest.mark.e2e
def test_scratch_quota_verdict_does_not_stop_the_run(tmp_path, cache_dir, monkeypatch):
    from test_run import kbv_run, rows

    monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(SMALL_QUOTA))
    folder = tmp_path / "cands" / "filler"
    folder.mkdir(parents=True)
    (folder / "level_1_problem_3_sample_0_kernel.py").write_text(FILLS_SCRATCH.read_text())
    (folder / "level_1_problem_3_sample_1_kernel.py").write_text(HEADER + SMALL_SCRATCH_FILE)
    db = tmp_path / "filler.sqlite"
    done = kbv_run(tmp_path / "cands", db, ALLOW_LIBRARY, cache_dir=cache_dir)
    assert done.returncode == 0, done.stderr
    assert [r[5] for r in rows(db)] == ["runtime_error", "correct"]


# As in a container without user namespaces: kbv runs in a user namespace of its own in which
# no further one may be made (max_user_namespaces 0) and without capabilities, so its sandbox
# gets no mount namespace and the quota falls back to the watchdog.
NO_NAMESPACES = [
    "unshare",
    "-Ur",
    "sh",
    "-c",
    "echo 0 > /proc/sys/user/max_user_namespaces && "
    'exec setpriv --inh-caps=-all --bounding-set=-all "$@"',
    "sh",
]


@pytest.mark.e2e
def test_scratch_quota_falls_back_to_the_watchdog_without_namespaces(
    tmp_path, cache_dir, monkeypatch
):
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("needs unshare and setpriv (util-linux)")
    probe = subprocess.run(
        [*NO_NAMESPACES, "sh", "-c", "unshare -U true 2>/dev/null; echo inner=$?"],
        capture_output=True,
        text=True,
    )
    if "inner=" not in probe.stdout or "inner=0" in probe.stdout:
        pytest.skip(f"cannot make a namespace-less environment here: {probe.stderr.strip()}")
    monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(SMALL_QUOTA))
    out = tmp_path / "result.json"
    command = [
        *NO_NAMESPACES, kbv_binary(), "eval", "--problem", str(RELU),
        "--candidate", str(FILLS_SCRATCH), "--device", "cpu", "--json", str(out),
        "--cache-dir", str(cache_dir), "--quiet", *QUICK, ALLOW_LIBRARY,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["isolation"]["namespaces"].startswith("refused"), result["isolation"]
    quota = result["isolation"]["scratch_quota"]
    assert quota["kind"] == "watchdog", quota
    assert quota["why_not_tmpfs"].startswith("no mount namespace"), quota
    assert result["verdict"] == "runtime_error", result["reason"]
    assert f"over the {SMALL_QUOTA}-byte quota" in result["reason"], result["reason"]


SPOILS_ITS_OUTPUTS = """
import gc
import threading
import time


def _spoil():
    # The worker copies each output into the shared slot the reference judges; this thread
    # finds the slot through the garbage collector and keeps overwriting it, while kbv judges.
    end = time.time() + 30
    while time.time() < end:
        for obj in gc.get_objects():
            if type(obj).__name__ == "Block" and type(obj).__module__ == "kbv.shared":
                for value in getattr(obj, "values", []):
                    if isinstance(value, torch.Tensor):
                        value.fill_(7.0)
        time.sleep(0.0005)


class ModelNew(nn.Module):
    started = False

    def forward(self, x):
        if not ModelNew.started:
            ModelNew.started = True
            threading.Thread(target=_spoil, daemon=True).start()
        return torch.relu(x)
"""


@pytest.mark.e2e
def test_outputs_spoiled_after_saving_cost_only_their_own_result(tmp_path, cache_dir):
    """A candidate whose thread overwrites the shared blocks it can reach (its output slot, its
    inputs) while kbv judges them: its result is a verdict with a reason, the run goes on, and
    the honest candidate after it is evaluated on unspoiled cases."""
    from test_run import kbv_run, rows

    folder = tmp_path / "cands" / "spoil"
    folder.mkdir(parents=True)
    (folder / "level_1_problem_3_sample_0_kernel.py").write_text(HEADER + SPOILS_ITS_OUTPUTS)
    (folder / "level_1_problem_3_sample_1_kernel.py").write_text(HEADER + HONEST_FORWARD)
    db = tmp_path / "spoil.sqlite"
    done = kbv_run(tmp_path / "cands", db, ALLOW_LIBRARY, cache_dir=cache_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = [r[5] for r in rows(db)]
    assert verdicts[1] == "correct", verdicts
    assert verdicts[0] in ("rejected", "incorrect"), verdicts
    with sqlite3.connect(db) as con:
        (text,) = con.execute("SELECT result_json FROM results WHERE sample = 0").fetchone()
    result = json.loads(text)
    assert result["reason"]
    if verdicts[0] == "rejected":
        assert any(f["severity"] == "reject" for f in result["flags"]), result["flags"]


PEEKS_AT_IMPORT = """
import glob
import json
import time

# (named so that kbv run builds this file ahead: load_inline)
if os.path.basename(os.getcwd()).startswith("build-"):
    seen = []
    for _ in range(40):
        seen = sorted(os.listdir({root!r})) if os.path.isdir({root!r}) else []
        if any(name.startswith("kbv-run-") for name in seen):
            break
        time.sleep(0.25)
    golden = glob.glob({root!r} + "/*/golden/*")
    with open(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "peek.json"), "w") as out:
        json.dump({{"seen": seen, "golden": golden}}, out)
"""


@pytest.mark.e2e
def test_build_ahead_import_cannot_see_run_directories(tmp_path, cache_dir):
    """kbv run imports candidates ahead of evaluation to build them; that import-time code must
    not see the run directories (golden outputs) of the evaluations running beside it, its own
    problem's reference among them."""
    from test_run import kbv_run

    work = tmp_path / "work"
    root = work / "kbv-runs"
    folder = tmp_path / "cands" / "peek"
    folder.mkdir(parents=True)
    (folder / "level_1_problem_3_sample_0_kernel.py").write_text(HEADER + HONEST_FORWARD)
    # Unique content (its own build-cache folder, so a build ahead always happens): the root is
    # this test's own.
    peeker = HEADER + PEEKS_AT_IMPORT.format(root=str(root)) + HONEST_FORWARD
    (folder / "level_1_problem_3_sample_1_kernel.py").write_text(peeker)
    db = tmp_path / "peek.sqlite"
    done = kbv_run(
        tmp_path / "cands", db, "--work-dir", str(work), ALLOW_LIBRARY, cache_dir=cache_dir
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(db) as con:
        results = [json.loads(t) for (t,) in con.execute("SELECT result_json FROM results")]
    assert [r["verdict"] for r in results] == ["correct", "correct"]
    if not str(results[1]["isolation"].get("namespaces", "")).startswith(
        ("privileged", "user_namespace")
    ):
        pytest.skip("this machine refuses namespaces")
    digest = hashlib.sha256(peeker.encode()).hexdigest()[:24]
    peeks = list((cache_dir / "torch_extensions").glob(f"{digest}-cpu/*/peek.json"))
    assert peeks, "the build-ahead import did not run"
    seen = json.loads(peeks[0].read_text())
    assert not [n for n in seen["seen"] if n.startswith("kbv-run-")], seen
    assert not seen["golden"], seen


BUILDS_INTO_TMP_AND_HOME = """
MARK = {mark!r}
os.makedirs(f"/tmp/cuda_extensions/{{MARK}}", exist_ok=True)
with open(f"/tmp/cuda_extensions/{{MARK}}/built.txt", "w") as handle:
    handle.write("built")
HOME_CACHE = os.path.expanduser(f"~/.cache/{{MARK}}")
os.makedirs(HOME_CACHE, exist_ok=True)
with open(os.path.join(HOME_CACHE, "entry"), "w") as handle:
    handle.write("cached")
"""

READS_BACK = """
class ModelNew(nn.Module):
    def forward(self, x):
        with open(f"/tmp/cuda_extensions/{MARK}/built.txt") as handle:
            assert handle.read() == "built"
        with open(os.path.join(HOME_CACHE, "entry")) as handle:
            assert handle.read() == "cached"
        return torch.relu(x)
"""

FILLS_TMP = """
class ModelNew(nn.Module):
    def forward(self, x):
        for i in range(64):
            with open(f"/tmp/kbv-fill-{i}.bin", "wb") as handle:
                handle.write(b"\\0" * (4 << 20))
        return torch.relu(x)
"""


@pytest.mark.e2e
def test_candidate_builds_into_a_private_tmp_and_home(tmp_path, run_eval):
    """As under KernelBench, a candidate may build into /tmp/... or ~/.cache/... at import: both
    work, inside its sandbox, and nothing of it reaches the machine's /tmp or HOME."""
    mark = f"kbv-private-{tmp_path.name}"
    body = BUILDS_INTO_TMP_AND_HOME.format(mark=mark)
    evaluation = run_eval(RELU, candidate(tmp_path, "tmp_builder", body, READS_BACK))
    isolation = require_isolation(evaluation)
    assert evaluation.verdict == "correct", evaluation.result["reason"]
    assert isolation["private_tmp"]["done"] is True, isolation["private_tmp"]
    assert not (Path("/tmp/cuda_extensions") / mark).exists()
    assert not (Path.home() / ".cache" / mark).exists()


@pytest.mark.e2e
def test_a_private_tmp_counts_in_the_scratch_quota(tmp_path, run_eval, monkeypatch):
    monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(SMALL_QUOTA))
    evaluation = run_eval(RELU, candidate(tmp_path, "tmp_filler", "", FILLS_TMP))
    require_isolation(evaluation)
    reason = evaluation.result["reason"]
    assert evaluation.verdict == "runtime_error", reason
    # 256 MiB into /tmp stop at the 64 MiB quota: the write fails (or the watchdog of the tmpfs
    # sees it full first), and nothing reaches the machine's /tmp.
    assert "scratch quota exceeded" in reason or "No space left on device" in reason, reason
    assert not list(Path("/tmp").glob("kbv-fill-*.bin"))


# A candidate that leaves its process group (setsid) and clears its parent-death signal: killing
# its group and its sandbox's relay would leave it running, holding its memory (device memory
# too) for every later evaluation. kbv kills every process below its worker by parent links,
# found before anything is killed (orchestrate/worker_process.cpp).
def _leaves_its_group(marker: str, then: str) -> str:
    head = f"""
    import ctypes
    import threading
    import time

    libc = ctypes.CDLL(None)
    libc.prctl(15, ctypes.c_char_p(b"{marker}"), 0, 0, 0)  # PR_SET_NAME: found by the test
    os.setsid()
    libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG: none
    """
    return textwrap.dedent(head) + textwrap.dedent(then)


def _survivors(marker: str) -> list[int]:
    """Processes with the marker still running (a zombie has ended: it holds no memory, and
    whoever inherited it reaps it in its own time)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or (entry / "comm").read_text().strip() != marker:
                continue
            if "State:\tZ" not in (entry / "status").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _assert_none_survive(marker: str) -> None:
    try:
        deadline = time.monotonic() + 10  # a process's end takes a moment (a CUDA context more)
        while _survivors(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _survivors(marker) == []
    finally:
        for pid in _survivors(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.e2e
def test_a_candidate_that_leaves_its_group_and_blocks_its_exit_is_still_ended(tmp_path, run_eval):
    """It also keeps the interpreter's lock in a blocking C call after its first forward, so it
    never reads the exit request: the call times out and kbv kills it."""
    marker = f"kbvsurv{os.getpid() % 100000}"
    body = _leaves_its_group(
        marker,
        """
        def _freeze():
            ctypes.PyDLL(None).sleep(600)  # holds the interpreter's lock
        """,
    )
    forward = """
class ModelNew(nn.Module):
    def forward(self, x):
        threading.Timer(0.2, _freeze).start()
        return torch.relu(x)
"""
    evaluation = run_eval(RELU, candidate(tmp_path, "frozen", body, forward), "--timeout", "10")
    try:
        # Without a PID namespace the worker is its own group's leader: setsid fails at import.
        require_isolation(evaluation)
        assert evaluation.verdict == "timeout", evaluation.result["reason"]
    finally:
        _assert_none_survive(marker)


@pytest.mark.e2e
def test_a_candidate_that_leaves_its_group_and_fills_its_scratch_is_still_ended(
    tmp_path, run_eval, monkeypatch
):
    """Its scratch quota is exceeded while kbv waits on a worker: the group kill there (the
    quota's) must reach it too."""
    monkeypatch.setenv("KBV_SCRATCH_QUOTA_BYTES", str(SMALL_QUOTA))
    marker = f"kbvfill{os.getpid() % 100000}"
    body = _leaves_its_group(
        marker,
        """
        def _fill():
            index = 0
            while True:
                try:
                    with open(f"bg_{index % 64}.bin", "wb") as handle:
                        handle.write(b"x" * (4 << 20))
                except OSError:
                    ctypes.PyDLL(None).sleep(600)  # full: freeze with the interpreter's lock
                index += 1

        threading.Thread(target=_fill, daemon=True).start()
        time.sleep(1)
        """,
    )
    evaluation = run_eval(RELU, candidate(tmp_path, "filler", body))
    try:
        require_isolation(evaluation)
        assert evaluation.verdict == "runtime_error", evaluation.result["reason"]
        assert "scratch quota exceeded" in evaluation.result["reason"]
    finally:
        _assert_none_survive(marker)
