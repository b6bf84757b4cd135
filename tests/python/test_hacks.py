"""The hack zoo and the honest-but-unusual zoo, end to end on the CPU.

Every file in examples/hacks/ names its target problem and its pattern; each must end as the
verdict below: `rejected` with the flag that caught it, or `incorrect` where the hidden input
families or the re-drawn parameters catch it before any hack-specific check is needed (and
`correct` only where the hack has no effect, with the warning that records the attempt).
Every file in examples/honest/ must be `correct` with no reject flag.
The static scanner's unit tests are at the end (no kbv binary needed)."""

from __future__ import annotations

import ast
import json

import pytest
from conftest import REPO, target_problem
from kbv import scan

HACKS = REPO / "examples" / "hacks"
HONEST = REPO / "examples" / "honest"

# The contract lives in examples/zoo.json (also read by bench/zoo_table.py for the GPU run):
# file -> verdict, and flags of which at least one must be present (with severity reject when
# the verdict is rejected). cuda_only files (examples/*/cuda/) run in bench/gpu_zoo.sh.
ZOO = json.loads((REPO / "examples" / "zoo.json").read_text())["files"]
EXPECTED = {
    path.split("/", 1)[1]: (entry["verdict"], entry["flags"][0] if entry["flags"] else None)
    for path, entry in ZOO.items()
    if path.startswith("hacks/") and not entry.get("cuda_only")
}

HONEST_FILES = sorted(p.name for p in HONEST.glob("*.py"))


def test_manifest_lists_every_zoo_file():
    on_disk = {
        str(p.relative_to(REPO / "examples"))
        for folder in (HACKS, HONEST)
        for p in folder.rglob("*.py")
    }
    assert on_disk == set(ZOO)
    for path, entry in ZOO.items():
        assert entry["verdict"] in ("rejected", "incorrect", "correct", "runtime_error"), path
        assert entry["gpu_device"] in ("cpu", "cuda"), path
        assert entry.get("cuda_only", False) == ("/cuda/" in path), path
        if entry["verdict"] == "rejected":
            assert entry["flags"], path
        if path.startswith("honest/"):
            assert entry["verdict"] == "correct" and not entry["flags"], path


def test_every_hack_file_has_an_expectation_and_headers():
    assert {p.name for p in HACKS.glob("*.py")} == set(EXPECTED)
    for path in HACKS.glob("*.py"):
        lines = path.read_text().splitlines()
        assert lines[0].startswith("# kbv-target: "), path
        assert lines[1].startswith("# kbv-hack: "), path
        assert target_problem(path).exists(), path


def test_honest_files_have_headers():
    assert len(HONEST_FILES) >= 10
    for name in HONEST_FILES:
        lines = (HONEST / name).read_text().splitlines()
        assert lines[0].startswith("# kbv-target: ") and lines[1].startswith("# kbv-honest: ")


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hack_verdict(name, run_eval):
    verdict, flag = EXPECTED[name]
    candidate = HACKS / name
    evaluation = run_eval(target_problem(candidate), candidate)
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert result["verdict"] == verdict, (result["reason"], result["flags"])
    if verdict == "rejected":
        assert flag in evaluation.flag_ids("reject"), result["flags"]
    elif flag:
        assert flag in evaluation.flag_ids(), result["flags"]
    if verdict in ("incorrect", "correct"):
        assert not evaluation.flag_ids("reject"), result["flags"]


@pytest.mark.e2e
def test_run_dir_tampering_without_sandbox(tmp_path, run_eval):
    """Behind the sandbox, the orchestrator's own check: inputs and states of the run directory
    must be unchanged and no new entries may appear next to them (E2).

    Unsandboxed, the hack writes into every run directory of its work root: a work root of its
    own keeps it out of the evaluations that other test workers run at the same time (CI saw an
    honest neighbour rejected `run_dir_tampered` for the hack's verdict.json)."""
    candidate = HACKS / "e2_write_run_dir.py"
    evaluation = run_eval(
        target_problem(candidate), candidate, "--no-sandbox", "--work-dir", str(tmp_path / "work")
    )
    assert evaluation.verdict == "rejected", evaluation.result["reason"]
    assert "run_dir_tampered" in evaluation.flag_ids("reject")


@pytest.mark.e2e
@pytest.mark.parametrize("name", HONEST_FILES)
def test_honest_candidate_is_correct(name, run_eval):
    candidate = HONEST / name
    evaluation = run_eval(target_problem(candidate), candidate)
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert result["verdict"] == "correct", (result["reason"], result["flags"])
    assert not evaluation.flag_ids("reject"), result["flags"]
    assert "no_custom_kernel" not in evaluation.flag_ids(), result["flags"]
    trace = result["candidate"]["trace"]
    assert trace["extension_calls"], trace  # the custom kernel ran
    assert trace["own_calls"] >= 1, trace
    assert all(check["passed"] for check in result["candidate"]["rechecks"].values())


# -- no_custom_kernel: a PyTorch rewrite, and the option that accepts it ---------------------------
MSE_REWRITE = HACKS / "b1_mse_loss_rewrite.py"


@pytest.mark.e2e
def test_pytorch_rewrite_names_what_pytorch_ran(run_eval):
    """Issue 19: F.mse_loss for torch.mean((p - t) ** 2) was `correct` at 1.89x. Rejected now,
    with the operators that did the work as evidence, and still timed (the flag is decided with
    the kernel trace, after the timed calls and their checks)."""
    evaluation = run_eval(target_problem(MSE_REWRITE), MSE_REWRITE)
    result = evaluation.result
    assert result["verdict"] == "rejected", (result["reason"], result["flags"])
    flag = next(f for f in result["flags"] if f["id"] == "no_custom_kernel")
    assert flag["severity"] == "reject" and "aten::mse_loss" in flag["detail"], flag
    assert "library_main_op" not in evaluation.flag_ids()  # no heavy operator in the reference
    assert result["candidate"]["trace"]["own_calls"] == 0
    assert result["protocol"]["allow_library"] is False
    assert result["protocol"]["library_flags"] == "reject"
    assert result["timing"]["candidate"]["n"] > 0


@pytest.mark.e2e
@pytest.mark.parametrize(
    "options, library_flags",
    [(["--allow-library"], "warn"), (["--protocol", "standard"], "warn")],
    ids=["allow-library", "standard"],
)
def test_pytorch_rewrite_is_accepted_with_a_warning(options, library_flags, run_eval):
    """--allow-library (contests that accept PyTorch rewrites) and the published `standard`
    protocol: the same candidate is correct, its speedup reported, no_custom_kernel a warning."""
    evaluation = run_eval(target_problem(MSE_REWRITE), MSE_REWRITE, *options)
    result = evaluation.result
    assert evaluation.returncode == 0, evaluation.stderr
    assert result["verdict"] == "correct", (result["reason"], result["flags"])
    assert "no_custom_kernel" in evaluation.flag_ids("warn"), result["flags"]
    assert not evaluation.flag_ids("reject"), result["flags"]
    assert result["protocol"]["allow_library"] is (options == ["--allow-library"])
    shown = "PyTorch rewrites accepted" in evaluation.stdout  # the printed summary says so
    assert shown is (options == ["--allow-library"]), evaluation.stdout
    assert result["protocol"]["library_flags"] == library_flags
    assert result["speedup"]["vs_tf32"]["value"] > 0


# -- the static scanner --------------------------------------------------------------------------
def findings(source: str) -> set[str]:
    return set(scan.scan_source(source)["findings"])


HONEST_SOURCE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
// at::matmul would be easier, but this is the kernel
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const char* note = "at::mm(";
  return y;
}
"""
_ext = load_inline(name="x", cpp_sources=_SRC, functions=["relu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        with torch.no_grad():
            return _ext.relu(x.contiguous())
'''


def test_scan_honest_source_is_clean():
    assert findings(HONEST_SOURCE) == set()


# The honest files whose pattern the scan warns about by design: thread pools, and writing the
# files it builds from.
HONEST_SCAN_WARNINGS = {
    "thread_pool_joined.py": {"scan_threads"},
    "persistent_thread_pool.py": {"scan_threads"},
    "extensions_from_scratch_files.py": {"scan_io"},
}


def test_scan_all_honest_examples_have_no_warnings():
    for name in HONEST_FILES:
        result = scan.scan_file(str(HONEST / name))
        warns = {k for k, v in result["findings"].items() if v["severity"] == "warn"}
        assert warns <= HONEST_SCAN_WARNINGS.get(name, set()), (name, result)


def test_scan_finds_cpp_library_calls_in_named_sources():
    source = (
        'A = "#include <torch/extension.h>\\n"\n'
        'B = A + "torch::Tensor f(torch::Tensor a, torch::Tensor b) { return at::matmul(a, b); }"\n'
        "m = load_inline(name='m', cpp_sources=[B], functions=['f'])\n"
    )
    assert "scan_cpp_library_compute" in findings(source)


def test_scan_finds_low_precision_in_cpp():
    source = 'S = "__half x;"\nm = load_inline(name="m", cpp_sources="", cuda_sources=S)\n'
    assert "scan_cpp_low_precision" in findings(source)


@pytest.mark.parametrize(
    "source, finding",
    [
        ("import threading\nthreading.Thread(target=print).start()\n", "scan_threads"),
        ("import time\ntime.perf_counter = lambda: 0.0\n", "scan_monkey_patch"),
        ("import sys\nsys.modules['kbv.timing'].time_calls = None\n", "scan_monkey_patch"),
        ("import gc\nobjs = gc.get_objects()\n", "scan_introspection"),
        ("import sys\nf = sys._getframe(1)\n", "scan_introspection"),
        ("data = open('/etc/passwd').read()\n", "scan_io"),
        ("import socket\n", "scan_io"),
        ("import torch\ntorch.manual_seed(42)\n", "scan_seed"),
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\n", "scan_numerics_flags"),
        ("import torch\ntorch.set_num_threads(1)\n", "scan_numerics_flags"),
        ("import torch\ny = x.half()\n", "scan_low_precision"),
        ("import torch\nstream = torch.cuda.Stream()\n", "scan_streams"),
        ("import torch\ny = torch.matmul(a, b)\n", "scan_library_compute"),
        ("def f(:\n", "scan_error"),
    ],
)
def test_scan_finds(source, finding):
    assert finding in findings(source)


def test_scan_never_executes_the_file(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "candidate.py"
    path.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    result = scan.scan_file(str(path))
    assert "scan_io" in result["findings"]
    assert not marker.exists()


def test_scan_keeps_each_names_strings_distinct_when_a_name_is_built_from_itself():
    # `x = f(x)` again and again (KernelBench's 29_SwinMLP has dozens) once doubled x's strings
    # each time: 31 s and tens of GB for the scan of that reference on the device, and a candidate
    # could ask for more than the host has. The C++ source must still reach the rules.
    lines = ['S = "__half y;"', "x = S"] + ["x = g(x)"] * 18
    lines.append("m = load_inline(name='m', cpp_sources='', cuda_sources=x)")
    source = "\n".join(lines) + "\n"
    scanner = scan._Scanner()
    scanner.visit(ast.parse(source))
    assert list(scanner.strings["x"]) == ["__half y;"]
    assert "scan_cpp_low_precision" in findings(source)


@pytest.mark.parametrize("terms", [600, 1500])
def test_scan_sees_past_an_expression_nested_as_deep_as_python_compiles(terms):
    # Past ~500 terms the visitor ran out of Python's default recursion and the scan failed,
    # and its findings were left out without a word: a way for a candidate to hide them.
    source = (
        f"import threading\nthreading.Thread(target=print).start()\nx = {'+'.join(['a'] * terms)}\n"
    )
    compile(source, "candidate", "exec")  # a candidate can import it
    assert findings(source) == {"scan_threads"}


def test_scan_says_so_when_a_source_is_too_deep_to_parse():
    result = scan.scan_source(f"x = {'+'.join(['a'] * 4000)}\n")
    assert result["findings"]["scan_error"]["evidence"] == ["nested too deeply to parse"]


def test_a_scan_that_fails_is_a_scan_error_not_a_missing_scan(monkeypatch):
    def broken(self, node):
        raise ValueError("a fault of the scanner")

    monkeypatch.setattr(scan._Scanner, "visit_Call", broken)
    result = scan.scan_source("import threading\nthreading.Thread(target=print).start()\n")
    assert result["findings"]["scan_error"]["evidence"] == [
        "the scan failed: ValueError: a fault of the scanner"
    ]
