"""Harness faults end to end on the CPU (issue 18, point 3): a fault of kbv itself (a full disk
under kbv's own writes or its build cache, a reference worker that crashed, junk on the
reference's channel, the reference out of memory) is the outcome `harness_error` with its kind,
never the candidate's verdict; `kbv eval` exits 3, `kbv run` goes on, stores it, leaves it out of
the report's figures and evaluates it again on a rerun. Each is provoked for real, beside its
honest counterpart: the same symptom caused or merely claimed by the candidate stays the
candidate's verdict (src/judge/harness_fault.hpp). Since the case path (docs/case-path.md) kbv
writes nothing of a case to disk, so the full disks left to provoke are the work root at the
start and the build cache."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS, QUICK, kbv_binary, wait_for

RELU = PROBLEMS / "level1" / "3_ReLU.py"
HONEST_RELU = CPU_CANDIDATES / "level1" / "3_ReLU.py"  # builds a C++ extension
RUN = ["--device", "cpu", "--draws", "1", "--samples", "2", "--rounds", "1", "-q"]
# The candidates here are mostly plain PyTorch on purpose (kbv's own faults are on trial, not
# whose code computes): every evaluation accepts PyTorch rewrites (no_custom_kernel a warning).
ALLOW_LIBRARY = "--allow-library"

# A pure-PyTorch ReLU whose first forward waits: long enough for a test to act between the
# reference's drawing and the candidate's first saved output.
SLOW_FIRST_FORWARD = """
import time
import torch
from torch import nn

_calls = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        if _calls[0] == 1:
            time.sleep(6)
        return torch.relu(x)
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def private_mounts() -> list[str]:
    """The command prefix of a private mount namespace in which tmpfs may be mounted: root's
    own (`unshare -m`) or, for another user, one in a user namespace mapping it to root."""
    for prefix in (["unshare", "-m", "--propagation", "private"], ["unshare", "-Urm"]):
        if shutil.which(prefix[0]) is None:
            break
        probe = subprocess.run(
            [*prefix, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return prefix
    pytest.skip("this machine allows no private mount namespace with a tmpfs")


def on_tmpfs(command: list[str], mounts: list[tuple[Path, str, int | None]]) -> list[str]:
    """`command` in a private mount namespace where each (folder, size, free) is a fresh tmpfs
    of that size; with `free` set, a filler file leaves only that many bytes free on it."""
    script = ["set -e"]
    for folder, size, free in mounts:
        folder.mkdir(parents=True, exist_ok=True)
        script.append(f"mount -t tmpfs -o size={size} tmpfs '{folder}'")
        if free is not None:
            script.append(f"dd if=/dev/zero of='{folder}/filler' bs=64k 2>/dev/null || true")
            script.append(f"truncate -s -{free} '{folder}/filler'")
    script.append('exec "$@"')
    return [*private_mounts(), "sh", "-c", "\n".join(script), "sh", *command]


def kbv_eval(tmp_path, cache_dir, problem, candidate, *extra) -> list[str]:
    return [
        kbv_binary(), "eval", "--problem", str(problem), "--candidate", str(candidate),
        "--device", "cpu", "--json", str(tmp_path / "result.json"),
        "--cache-dir", str(cache_dir), "--quiet", *QUICK, ALLOW_LIBRARY, *extra,
    ]  # fmt: skip


def kbv_run(problems, candidates, db, cache_dir, *extra) -> list[str]:
    return [
        kbv_binary(), "run", "--problems", str(problems), "--candidates", str(candidates),
        "--db", str(db), "--cache-dir", str(cache_dir), "--timeout", "60", *RUN, ALLOW_LIBRARY,
        *extra,
    ]  # fmt: skip


def result_of(tmp_path) -> dict:
    return json.loads((tmp_path / "result.json").read_text())


def stored(db) -> dict[str, dict]:
    """Stored results by candidate file name."""
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT candidate_path, result_json FROM results").fetchall()
    return {Path(path).name: json.loads(text) for path, text in rows}


def env_with(**values) -> dict[str, str]:
    env = dict(os.environ)
    env.update({k: str(v) for k, v in values.items()})
    return env


# -- disk full ---------------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_full_work_root_costs_nothing_since_cases_are_not_files(tmp_path, cache_dir):
    """The work root (TMPDIR) is a tmpfs with no byte free. Before the case path (issue 18) the
    reference's first case file failed with ENOSPC (a disk_full harness error at best, the
    candidate's runtime_error on the H200); now an evaluation writes nothing of its cases, so it
    runs to its verdict on a full disk."""
    work = tmp_path / "work"
    command = on_tmpfs(kbv_eval(tmp_path, cache_dir, RELU, HONEST_RELU), [(work, "16m", 0)])
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env=env_with(TMPDIR=work)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert result_of(tmp_path)["verdict"] == "correct", result_of(tmp_path)["reason"]


@pytest.mark.e2e
def test_the_candidates_own_words_of_a_full_disk_stay_its_verdict(tmp_path, cache_dir):
    """A candidate that raises "No space left on device" itself (at import, dressed as a failed
    build, or in its forward) on a disk with room: its compile_error and runtime_error."""
    at_import = write(
        tmp_path / "says_build_full.py",
        """
        raise RuntimeError(
            "Error building extension 'x': FAILED: main.o\\n"
            "Fatal error: can't write main.o: No space left on device (os error 28)"
        )
        """,
    )
    done = subprocess.run(
        kbv_eval(tmp_path, cache_dir, RELU, at_import), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert result_of(tmp_path)["verdict"] == "compile_error"
    in_forward = write(
        tmp_path / "says_disk_full.py",
        """
        import errno
        import torch
        from torch import nn


        class ModelNew(nn.Module):
            def forward(self, x):
                raise OSError(errno.ENOSPC, "No space left on device")
        """,
    )
    done = subprocess.run(
        kbv_eval(tmp_path, cache_dir, RELU, in_forward), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = result_of(tmp_path)
    assert result["verdict"] == "runtime_error", result["reason"]
    assert "No space left on device" in result["reason"]


FORGED_ANSWER = """
import json
import os
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        # An answer of its own on its worker's channel (fd 4), before the worker's.
        os.write(4, (json.dumps(ANSWER) + "\\n").encode())
        return torch.relu(x)
"""


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (
            {
                "ok": False,
                "error": {
                    "kind": "internal_error",
                    "message": "SafetensorError: No space left on device (os error 28)",
                    "resource": "disk_full",
                },
            },
            "No space left on device",
        ),
        ({"ok": True, "result": 5}, "lacks what kbv reads from it"),
    ],
    ids=["forged_internal_disk_full", "forged_ill_shaped_result"],
)
def test_answers_the_candidate_forges_on_its_channel_stay_its_verdict(
    tmp_path, cache_dir, answer, says
):
    """The candidate's process can write anything on its own channel: a forged internal_error
    naming a full disk (on a disk with room), or a result kbv cannot read, never make a harness
    fault. Such a line names no request (every answer echoes its request's `seq`), so it is
    forged: the candidate is rejected `channel_forged`, the line's words are not taken."""
    forger = write(tmp_path / "forger.py", FORGED_ANSWER.replace("ANSWER", repr(answer)))
    done = subprocess.run(
        kbv_eval(tmp_path, cache_dir, RELU, forger), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = result_of(tmp_path)
    assert result["verdict"] == "rejected", result["reason"]
    assert "channel_forged" in {f["id"] for f in result["flags"] if f["severity"] == "reject"}
    assert says not in result["reason"]
    assert "harness_fault" not in result


@pytest.mark.e2e
def test_a_build_cache_on_a_full_disk_is_a_harness_error_not_a_compile_error(tmp_path):
    """The build cache is a tmpfs with 64 KiB left: the C++ extension's build fails with ENOSPC.
    kbv sees the cache's disk lacking room and the candidate's files there small: kbv's fault,
    not the candidate's compile_error (the same file builds and is correct on a disk with room,
    tests/python/test_suite_cpu.py)."""
    cache = tmp_path / "cache"
    command = on_tmpfs(kbv_eval(tmp_path, cache, RELU, HONEST_RELU), [(cache, "32m", 64 << 10)])
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 3, done.stdout + done.stderr
    result = result_of(tmp_path)
    assert result["verdict"] == "harness_error", result["reason"]
    assert result["harness_fault"]["kind"] == "disk_full"
    assert result["harness_fault"]["stage"] == "building and importing the candidate"
    assert str(cache) in result["harness_fault"]["detail"]


# -- the reference worker ----------------------------------------------------------------------


def reference_workers_of(pid: int) -> list[int]:
    """The reference worker processes (`python -m kbv.worker --role reference`) below `pid`."""

    def parent(p: int) -> int:
        try:
            return int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return 0

    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kbv.worker" not in argv or argv[argv.index(b"--role") + 1] != b"reference":
            continue
        # Only the interpreter itself: where `python3` is a pyenv shim, the shell scripts it runs
        # on the way to the interpreter carry the same arguments for a moment (CI saw two).
        try:
            if "python" not in os.path.basename(os.readlink(entry / "exe")):
                continue
        except OSError:
            continue
        p = int(entry.name)
        while p > 1 and p != pid:
            p = parent(p)
        if p == pid:
            found.append(int(entry.name))
    return found


def kill_the_reference_once_drawn(process: subprocess.Popen, work: Path):
    """SIGKILL to the reference worker of `process` (kbv) while the first candidate is checked:
    once the reference has shared its first case with the candidate (its calls are traced to
    `work`/trace.jsonl, see `traced_env`), inside the first forward's 6 s sleep. (A kill at a
    fixed delay after the reference started came while it still loaded the problem when CI was
    under load.)"""
    (victim,) = wait_for(lambda: reference_workers_of(process.pid), 120, "the reference")
    trace = work / "trace.jsonl"
    wait_for(
        lambda: trace.exists() and '"cmd":"share_case"' in trace.read_text(),
        300,
        "the first case shared with the candidate",
    )
    time.sleep(1)
    os.kill(victim, signal.SIGKILL)


def traced_env(work: Path) -> dict:
    """The environment of a kbv whose reference `kill_the_reference_once_drawn` kills."""
    return env_with(TMPDIR=work, KBV_TRACE_CALLS=work / "trace.jsonl")


def run_with_the_reference_killed(command: list[str], work: Path) -> str:
    """`command` (kbv) with its first reference killed once drawn (its calls traced to `work`);
    it must exit 0. Its standard output."""
    work.mkdir()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=traced_env(work),
    )
    try:
        kill_the_reference_once_drawn(process, work)
        stdout, stderr = process.communicate(timeout=900)
    finally:
        process.kill()
    assert process.returncode == 0, stdout + stderr
    return stdout


def evaluate_with_the_reference_killed(tmp_path, cache_dir, candidate, *extra) -> dict:
    """`kbv eval` of `candidate` on ReLU with its reference killed once drawn; the result."""
    run_with_the_reference_killed(
        kbv_eval(tmp_path, cache_dir, RELU, candidate, *extra), tmp_path / "work"
    )
    return result_of(tmp_path)


@pytest.mark.e2e
def test_a_reference_worker_killed_mid_evaluation(tmp_path, cache_dir):
    """kbv run over three candidates of one problem; the reference worker is killed (SIGKILL)
    once it has drawn the cases, while the first candidate is being checked. That candidate is
    harness_error (reference_crashed), stored and left out of the report; the run goes on with
    a new reference for the next two; a rerun evaluates it again and replaces it."""
    cands = tmp_path / "cands" / "plain"
    write(cands / "level_1_problem_3_sample_0_kernel.py", SLOW_FIRST_FORWARD)
    for sample in (1, 2):  # two files (results are stored by content), one build each
        write(
            cands / f"level_1_problem_3_sample_{sample}_kernel.py",
            SLOW_FIRST_FORWARD.replace("6", str(sample)),
        )
    db = tmp_path / "results.sqlite"
    work = tmp_path / "work"
    problems = tmp_path / "problems" / "level1"
    problems.mkdir(parents=True)
    shutil.copy(RELU, problems / RELU.name)
    command = kbv_run(problems.parent, cands.parent, db, cache_dir)
    stdout = run_with_the_reference_killed(command, work)
    results = stored(db)
    first = results["level_1_problem_3_sample_0_kernel.py"]
    assert first["verdict"] == "harness_error", first["reason"]
    assert first["harness_fault"]["kind"] == "reference_crashed"
    assert "SIGKILL" in first["harness_fault"]["detail"]
    assert [results[f"level_1_problem_3_sample_{s}_kernel.py"]["verdict"] for s in (1, 2)] == [
        "correct",
        "correct",
    ]
    assert "1 harness error (faults of kbv itself" in stdout
    assert "reference_crashed" in stdout

    report = subprocess.run(
        [kbv_binary(), "report", str(db), "--format", "json"], capture_output=True, text=True
    )
    figures = json.loads(report.stdout)
    overall = figures["sections"][0]["overall"]["figures"]
    assert overall["tasks"] == 2 and overall["correct_rate"] == 1.0
    assert [h["harness_fault"]["kind"] for h in figures["harness_errors"]] == ["reference_crashed"]

    again = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env_with(TMPDIR=work)
    )
    assert again.returncode == 0, again.stderr
    assert "1 evaluated now, 2 already stored" in again.stdout
    assert "1 stored harness error evaluated again" in again.stdout
    assert stored(db)["level_1_problem_3_sample_0_kernel.py"]["verdict"] == "correct"


@pytest.mark.e2e
def test_a_reference_killed_beside_an_unsandboxed_candidate_is_its_runtime_error(
    tmp_path, cache_dir
):
    """The counterpart: without the sandbox's PID namespace the candidate could have killed the
    reference itself (it sees its process), so in doubt the death is its runtime_error, never a
    harness_error it could provoke forever."""
    candidate = write(tmp_path / "slow.py", SLOW_FIRST_FORWARD)
    result = evaluate_with_the_reference_killed(tmp_path, cache_dir, candidate, "--no-sandbox")
    assert result["verdict"] == "runtime_error", result["reason"]
    assert "without a PID namespace" in result["reason"]


SWAP_HACK = CPU_CANDIDATES.parent.parent / "hacks" / "e2_swap_built_so.py"


def _swap_and_wait() -> str:
    """The library swap of the hack zoo with a first forward that waits 6 s (the time a test
    takes to kill the reference meanwhile)."""
    source = SWAP_HACK.read_text().replace(
        "        return _ext.relu(x)",
        "        _calls[0] += 1\n"
        "        if _calls[0] == 1:\n"
        "            time.sleep(6)\n"
        "        return _ext.relu(x)",
    )
    assert "time.sleep(6)" in source
    return "import time\n_calls = [0]\n" + source


@pytest.mark.e2e
def test_a_library_swapped_by_a_candidate_whose_reference_died_is_still_rejected(tmp_path):
    """The library swap of the hack zoo (examples/hacks/e2_swap_built_so.py: an honest extension
    built and loaded, then another library put under its name in the build cache) with a first
    forward that waits, and the reference killed meanwhile. Alone, the death is a harness_error
    (test_a_reference_worker_killed_mid_evaluation), evaluated again on a rerun, which would load
    the swapped library and record it as the first one loaded for this content. With the swap
    found once the candidate has ended, the swap decides: rejected, the fault noted beside it,
    and the library the candidate did load recorded in the manifest for the next load."""
    candidate = write(tmp_path / "swap_and_wait.py", _swap_and_wait())
    cache = tmp_path / "cache"  # its own: the swap stays out of every other test's cache
    result = evaluate_with_the_reference_killed(
        tmp_path, cache, candidate, "--compile-timeout", "600"
    )
    flags = {f["id"]: f for f in result["flags"]}
    assert result["verdict"] == "rejected", (result["reason"], result["flags"])
    assert flags["build_cache_tampered"]["severity"] == "reject"
    beside = flags["harness_fault_beside_tampering"]["detail"]
    assert "reference" in beside, beside
    assert "harness_fault" not in result
    assert list(cache.rglob("*.kbv-loaded.json")), "the loaded library was not recorded"


@pytest.mark.e2e
def test_a_library_swapped_by_an_unsandboxed_candidate_whose_reference_died_is_rejected(tmp_path):
    """The same swap and wait, without the sandbox: there the reference's death is the
    candidate's runtime_error (it could have killed it), an evaluation ended by an exception as
    the candidate's failure, evaluated again alone on a shared GPU, loading the swapped library.
    The checks made once the candidate has ended still run, and the swap decides."""
    candidate = write(tmp_path / "swap_and_wait.py", _swap_and_wait())
    cache = tmp_path / "cache"
    result = evaluate_with_the_reference_killed(
        tmp_path, cache, candidate, "--compile-timeout", "600", "--no-sandbox"
    )
    flags = {f["id"] for f in result["flags"]}
    assert result["verdict"] == "rejected", (result["reason"], result["flags"])
    assert "build_cache_tampered" in flags
    assert "harness_fault_beside_tampering" not in flags  # no fault of kbv's: its own failure
    assert list(cache.rglob("*.kbv-loaded.json")), "the loaded library was not recorded"


JUNK_AT_IMPORT = "import os\n\nos.write(4, b'this is not a message\\n')\n"


@pytest.mark.e2e
def test_junk_on_the_references_channel_is_a_harness_error(tmp_path, cache_dir):
    """A problem (trusted code) that writes junk on the reference worker's channel (fd 4) at
    import: kind channel, exit 3. The counterpart, a candidate doing the same on its own channel,
    is its runtime_error."""
    problem = write(tmp_path / "junk_problem.py", JUNK_AT_IMPORT + RELU.read_text())
    done = subprocess.run(
        kbv_eval(tmp_path, cache_dir, problem, HONEST_RELU), capture_output=True, text=True
    )
    assert done.returncode == 3, done.stdout + done.stderr
    result = result_of(tmp_path)
    assert result["verdict"] == "harness_error"
    assert result["harness_fault"]["kind"] == "channel"
    assert "this is not a message" in result["harness_fault"]["detail"]

    junk_candidate = write(
        tmp_path / "junk_candidate.py",
        JUNK_AT_IMPORT + "import torch\nfrom torch import nn\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n",
    )
    done = subprocess.run(
        kbv_eval(tmp_path, cache_dir, RELU, junk_candidate), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = result_of(tmp_path)
    assert result["verdict"] == "runtime_error", result["reason"]
    assert "malformed message" in result["reason"]


# -- out of memory -----------------------------------------------------------------------------

# The forward reserves (never touches) 12 GiB: nothing on a machine with the usual overcommit,
# more than the reference's address space under the knob below.
HUNGRY_RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        workspace = torch.empty(12 << 30, dtype=torch.uint8)
        del workspace
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16, 1024)]


def get_init_inputs():
    return []
"""


@pytest.mark.e2e
def test_the_reference_out_of_memory_is_a_harness_error_retried_by_a_rerun(tmp_path, cache_dir):
    """KBV_REFERENCE_ADDRESS_SPACE_BYTES caps the reference worker's address space (RLIMIT_AS)
    below what the problem's forward allocates: kbv's own allocation budget ran out, so
    harness_error (out_of_memory), not a broken problem and not the candidate's verdict. A rerun
    without the cap evaluates it properly. (The candidate running out of its own memory stays its
    runtime_error: tests/python/test_hostile.py test_host_memory_exhaustion_is_a_runtime_error.)"""
    problems = tmp_path / "problems" / "level1"
    write(problems / "3_ReLU.py", HUNGRY_RELU)
    cands = tmp_path / "cands" / "plain" / "level1"
    cands.mkdir(parents=True)
    shutil.copy(HONEST_RELU, cands / "3_ReLU.py")
    db = tmp_path / "results.sqlite"
    command = kbv_run(problems.parent, cands.parent.parent, db, cache_dir)
    # Room for the worker's torch (about 3.3 GB of address space on 2 cores) and its threads.
    cap = (8 << 30) + (os.cpu_count() or 1) * (128 << 20)
    capped = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=900,
        env=env_with(KBV_REFERENCE_ADDRESS_SPACE_BYTES=cap),
    )
    assert capped.returncode == 0, capped.stderr
    (result,) = stored(db).values()
    assert result["verdict"] == "harness_error", result["reason"]
    assert result["harness_fault"]["kind"] == "out_of_memory", result["harness_fault"]
    assert result["limits"]["reference_address_space_bytes"] == cap
    assert "could not be evaluated" not in capped.stdout  # not reported as a broken problem
    # Host memory: what the candidate held is not weighed (src/judge/held_memory.hpp).
    assert result["harness_fault"]["memory"] == "host", result["harness_fault"]
    assert "held_memory" not in result["candidate"]

    again = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert "1 stored harness error evaluated again" in again.stdout
    (result,) = stored(db).values()
    assert result["verdict"] == "correct", result["reason"]
