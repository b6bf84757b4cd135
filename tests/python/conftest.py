"""Shared fixtures: where the kbv binary and the bundled suite are, and a runner for `kbv eval`
that returns the exit status, the parsed JSON result and the printed output."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = REPO / "problems"
CPU_CANDIDATES = REPO / "examples" / "candidates" / "cpu"
CUDA_CANDIDATES = REPO / "examples" / "candidates" / "cuda"
WRONG = REPO / "examples" / "wrong"

# x @ w where the native inputs cancel: x has an offset of 100 and every column of w sums to 0,
# so each output (about 16) is far smaller than its terms (about 1,600): the sensitivity opens
# the budget far beyond the floor. The product is taken in float64 so that the reference is
# within the floor on a GPU too (TF32 would not be: 2^-11 of 1,600 is over 1% of 16), so its
# sensitivity is deferred (docs/protocol.md).
CANCELLING_MATMUL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return (x.double() @ w.double()).to(x.dtype)


def get_inputs():
    x = 100.0 + torch.randn(64, 256)
    w = torch.randn(256, 32)
    return [x, w - w.mean(dim=0, keepdim=True)]


def get_init_inputs():
    return []
"""

# The python package is importable for the unit tests without installing it.
sys.path.insert(0, str(REPO / "python"))


@pytest.fixture(autouse=True, scope="session")
def _join_reference_warm_ups():
    """A test that loads a problem into a ReferenceRole in this process starts the roofline's
    warm-up thread (kbv.roofline.warm_up_in_background); one still inside torch when the
    interpreter exits aborts it (`terminate called without an active exception`, exit 134)."""
    yield
    for thread in threading.enumerate():
        if thread.name == "kbv-flop-counter-warm-up":
            thread.join(timeout=120)


NATIVE_DIR = os.environ.get("KBV_NATIVE_DIR", str(REPO / "build"))


def run_python(code: str, timeout: float, **env: str) -> subprocess.CompletedProcess:
    """`python -c code` in a process of its own, with kbv and kbv_native (where this run found
    it) on its path as a worker has them, and `env` set."""
    parts = [str(REPO / "python"), NATIVE_DIR, os.environ.get("PYTHONPATH")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, parts)), **env}
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def import_native_or_skip_module():
    """kbv_native from $KBV_NATIVE_DIR (default build/), else the calling test module is skipped.
    Call at module level, after importing torch (kbv_native shares torch's CUDA runtime)."""
    sys.path.insert(0, NATIVE_DIR)
    try:
        return importlib.import_module("kbv_native")
    except ImportError as error:  # pragma: no cover - depends on the build
        pytest.skip(
            f"kbv_native not importable from {NATIVE_DIR}: {error}", allow_module_level=True
        )


def reference_role(folder: Path, device: str, source: str, **load):
    """A reference worker's role in this process (kbv.reference.ReferenceRole) with `source`
    loaded as its problem (written to `folder`/problem.py) and every case kept; `load` adds to
    the load request (a policy, a precision). Import kbv_native first
    (import_native_or_skip_module); close it with close_reference_role."""
    import textwrap

    from kbv import reference

    problem = folder / "problem.py"
    problem.write_text(textwrap.dedent(source))
    role = reference.ReferenceRole()
    role.cmd_load_problem({"device": device, "problem": str(problem), **load})
    role.cmd_set_plan({"cache_bytes": 1 << 30})
    return role


def close_reference_role(role) -> None:
    """Every shared arena the role made, closed."""
    role.cmd_end_candidate({})
    role.cache_bytes = 0
    role._evict(0, everything=True)
    if role.initial_block is not None:
        role.initial_block.close()


@pytest.fixture
def reference_roles(tmp_path):
    """`make(source, device="cpu", **load)`: reference_role in the test's folder, closed after."""
    roles = []

    def make(source: str, device: str = "cpu", **load):
        roles.append(reference_role(tmp_path, device, source, **load))
        return roles[-1]

    yield make
    for role in roles:
        close_reference_role(role)


def kbv_binary() -> str:
    explicit = os.environ.get("KBV_BIN")
    if explicit:
        return explicit
    built = REPO / "build" / "kbv"
    if built.exists():
        return str(built)
    found = shutil.which("kbv")
    if found:
        return found
    pytest.fail("no kbv binary: build it (cmake --build build) or set KBV_BIN", pytrace=False)


@dataclass
class Evaluation:
    returncode: int
    result: dict | None
    stdout: str
    stderr: str

    @property
    def verdict(self) -> str | None:
        return self.result["verdict"] if self.result else None

    def flag_ids(self, severity: str | None = None) -> set[str]:
        if not self.result:
            return set()
        return {
            f["id"] for f in self.result["flags"] if severity is None or f["severity"] == severity
        }


# Quick settings for tests: fewer draws and timing samples; correctness is still the full
# protocol (every family).
QUICK = ["--draws", "2", "--samples", "3", "--rounds", "1", "--timeout", "60"]


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    # Content-keyed build cache shared by every test and kept across runs and clones (warm CI).
    path = Path(os.environ.get("KBV_CACHE_DIR", Path.home() / ".cache" / "kbv"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def run_eval(tmp_path, cache_dir):
    def run(problem: Path, candidate: Path, *extra: str, timeout: float = 900) -> Evaluation:
        out = tmp_path / "result.json"
        command = [
            kbv_binary(),
            "eval",
            "--problem",
            str(problem),
            "--candidate",
            str(candidate),
            "--device",
            "cpu",
            "--json",
            str(out),
            "--cache-dir",
            str(cache_dir),
            "--quiet",
            *QUICK,
            *extra,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        result = json.loads(out.read_text()) if out.exists() else None
        return Evaluation(done.returncode, result, done.stdout, done.stderr)

    return run


def target_problem(candidate: Path) -> Path:
    """The problem a zoo file names in its `# kbv-target: levelN/Name` line."""
    for line in candidate.read_text().splitlines()[:5]:
        if line.startswith("# kbv-target:"):
            return PROBLEMS / (line.split(":", 1)[1].strip() + ".py")
    raise AssertionError(f"{candidate} has no kbv-target line")


def wait_for(predicate, seconds: float, what: str):
    """The predicate's first true value, polled every 50 ms; fails the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")
