"""`kbv generate` against fake OpenAI- and Anthropic-compatible servers on loopback: outcomes of
the answers (code, no code, two blocks), retries (429 with Retry-After, 500s, a body cut short,
timeouts), resume after SIGKILL, the key kept out of argv, output and generations.jsonl, and the
paper's table end to end on the CPU (generate, run under standard and verified, compare)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CPU_CANDIDATES, PROBLEMS, REPO, kbv_binary
from fake_llm import FakeApi, block

KEY = "sk-test-5ecret-do-not-leak-0123456789"
PROMPTS = REPO / "python" / "kbv" / "prompts"

# Each problem is recognised in a prompt by its Model's docstring.
MARKERS = {
    "3_ReLU": "Elementwise ReLU",
    "4_Softmax": "Softmax over",
    "10_MSELoss": "Mean squared error",
}


def honest(name: str) -> str:
    return (CPU_CANDIDATES / "level1" / f"{name}.py").read_text()


def problems_dir(root: Path, names=("3_ReLU", "4_Softmax", "10_MSELoss")) -> Path:
    level = root / "problems" / "level1"
    level.mkdir(parents=True)
    for name in names:
        shutil.copy(PROBLEMS / "level1" / f"{name}.py", level / f"{name}.py")
    return root / "problems"


def generate_command(problems, out, url, *extra, api="openai"):
    return [
        kbv_binary(), "generate", "--problems", str(problems), "--out", str(out), "--model",
        "fake-model", "--api", api, "--base-url", url, "--backoff", "0.05", *extra,
    ]  # fmt: skip


def key_env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env.pop("KBV_NO_API_KEY", None)
    env["KBV_API_KEY"] = KEY
    env.update(extra)
    return env


def run(command, env=None, timeout=120):
    assert KEY not in " ".join(command)  # the key never travels in argv
    return subprocess.run(
        command, capture_output=True, text=True, env=env or key_env(), timeout=timeout
    )


def ledger(out: Path) -> list[dict]:
    # Complete lines only: a kill may cut the last one (kbv drops it on the next run).
    lines = (out / "generations.jsonl").read_text().split("\n")[:-1]
    return [json.loads(line) for line in lines]


def assert_no_key(out: Path, *texts: str):
    for text in texts:
        assert KEY not in text
    for path in out.iterdir():
        assert KEY not in path.read_text(errors="replace"), path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_outcomes_layout_and_key(tmp_path, api):
    def script(problem, n, prompt):
        if problem == "3_ReLU":
            return ("answer", "Here is the kernel.\n" + block(honest("3_ReLU")))
        if problem == "4_Softmax":
            return ("answer", "I would rather not write code today.")
        if n == 1:  # stopped at the token limit inside the block
            return ("answer", "```python\nclass ModelNew(nn.Module):\n    def for", "length")
        # Two blocks: CUDA source first, the module second; the module is taken.
        return ("answer", block("__global__ void k() {}\n", "cpp") + block(honest("10_MSELoss")))

    problems = problems_dir(tmp_path)
    out = tmp_path / "gen"
    with FakeApi(api, script, MARKERS) as fake:
        done = run(generate_command(problems, out, fake.url, "--samples", "2", api=api))
    assert done.returncode == 0, done.stderr
    assert fake.counts == {"3_ReLU": 2, "4_Softmax": 2, "10_MSELoss": 2}
    # The key went to the server in the provider's header, and nowhere else.
    if api == "openai":
        assert all(h["Authorization"] == f"Bearer {KEY}" for h in fake.headers)
    else:
        assert all(h["x-api-key"] == KEY for h in fake.headers)
        assert all(h["anthropic-version"] for h in fake.headers)
    assert_no_key(out, done.stdout, done.stderr)

    rows = ledger(out)
    assert len(rows) == 6
    by_problem = {(r["problem"], r["sample"]): r for r in rows}
    relu = by_problem[("level1/3_ReLU", 0)]
    assert relu["outcome"] == "ok" and relu["level"] == 1 and relu["problem_id"] == 3
    assert relu["usage"] and relu["finish_reason"] and relu["latency_s"] >= 0
    assert relu["response"].startswith("Here is the kernel.")
    assert relu["model"] == "fake-model" and relu["prompt"] == "one-shot"
    assert relu["prompt_sha256"] == hashlib.sha256(fake.prompts["3_ReLU"].encode()).hexdigest()
    assert relu["prompt_files_sha256"]["one_shot.md"] == sha256(PROMPTS / "one_shot.md")
    assert (out / "level_1_problem_3_sample_1_kernel.py").read_text() == honest("3_ReLU")
    softmax = by_problem[("level1/4_Softmax", 1)]
    assert softmax["outcome"] == "no_code_block" and softmax["stub"] is True
    stub = (out / "level_1_problem_4_sample_1_kernel.py").read_text()
    assert "raise RuntimeError" in stub and "no_code_block" in stub
    # Which sample got which answer depends on the order requests arrived in.
    mse = {r["outcome"]: r for r in rows if r["problem"] == "level1/10_MSELoss"}
    assert set(mse) == {"several_code_blocks", "truncated"}
    assert mse["several_code_blocks"]["block_taken"] == 1
    several = out / mse["several_code_blocks"]["kernel_file"]
    assert several.read_text() == honest("10_MSELoss")
    truncated = mse["truncated"]
    assert truncated["finish_reason"] in ("length", "max_tokens") and not truncated["stub"]
    cut = (out / truncated["kernel_file"]).read_text()
    assert cut == "class ModelNew(nn.Module):\n    def for\n"
    for outcome in ("no_code_block", "several_code_blocks", "truncated"):
        assert outcome in done.stdout

    # Nothing missing: a rerun asks for nothing; a deleted file comes back from its row.
    (out / "level_1_problem_3_sample_0_kernel.py").unlink()
    with FakeApi(api, script, MARKERS) as fake:
        again = run(generate_command(problems, out, fake.url, "--samples", "2", api=api))
    assert again.returncode == 0, again.stderr
    assert sum(fake.counts.values()) == 0
    assert (out / "level_1_problem_3_sample_0_kernel.py").read_text() == honest("3_ReLU")
    assert len(ledger(out)) == 6


def test_retries_rate_limits_server_errors_and_cut_bodies(tmp_path):
    def script(problem, n, prompt):
        first = {
            "3_ReLU": ("status", 429, "1"),
            "4_Softmax": ("status", 500),
            "10_MSELoss": ("cut",),
        }[problem]
        if n == 0 or (problem == "4_Softmax" and n == 1):
            return first
        return ("answer", block(f"# {problem}\nclass ModelNew: pass\n"))

    problems = problems_dir(tmp_path)
    out = tmp_path / "gen"
    start = time.monotonic()
    with FakeApi("openai", script, MARKERS) as fake:
        done = run(generate_command(problems, out, fake.url))
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert fake.counts == {"3_ReLU": 2, "4_Softmax": 3, "10_MSELoss": 2}
    assert took >= 1.0  # the 429's Retry-After: 1 was honoured over the 50 ms backoff
    rows = {r["problem"]: r for r in ledger(out)}
    assert all(r["outcome"] == "ok" for r in rows.values())
    assert rows["level1/3_ReLU"]["attempts"] == 2
    assert "HTTP 429" in rows["level1/3_ReLU"]["retries"][0]
    assert "waited 1.0 s" in rows["level1/3_ReLU"]["retries"][0]
    assert rows["level1/4_Softmax"]["attempts"] == 3
    assert "transfer failed" in rows["level1/10_MSELoss"]["retries"][0]
    assert "ETA" in done.stderr or "took" in done.stderr


def test_timeouts_are_bounded_and_a_rerun_asks_again(tmp_path):
    def slow(problem, n, prompt):
        if problem == "3_ReLU":
            return ("sleep", 3, ("answer", block("class ModelNew: pass\n")))
        return ("answer", block("class ModelNew: pass\n"))

    problems = problems_dir(tmp_path)
    out = tmp_path / "gen"
    flags = ["--timeout", "0.5", "--timeout-retries", "1"]
    with FakeApi("openai", slow, MARKERS) as fake:
        done = run(generate_command(problems, out, fake.url, *flags))
    assert done.returncode == 1, done.stderr
    assert fake.counts["3_ReLU"] == 2  # the first try and one retry
    assert "1 sample without a candidate" in done.stdout
    failed = [r for r in ledger(out) if r["outcome"] == "request_failed"]
    assert len(failed) == 1 and "timed out" in failed[0]["error"]
    assert not (out / "level_1_problem_3_sample_0_kernel.py").exists()

    def quick(problem, n, prompt):
        return ("answer", block("class ModelNew: pass\n"))

    with FakeApi("openai", quick, MARKERS) as fake:
        again = run(generate_command(problems, out, fake.url, *flags))
    assert again.returncode == 0, again.stderr
    assert fake.counts == {"3_ReLU": 1}  # only the missing sample
    assert (out / "level_1_problem_3_sample_0_kernel.py").exists()


def test_kill_mid_run_and_resume_requests_only_what_is_missing(tmp_path):
    def script(problem, n, prompt):
        return ("sleep", 0.3, ("answer", block(f"class ModelNew: pass  # {problem} {n}\n")))

    problems = problems_dir(tmp_path)
    out = tmp_path / "gen"
    flags = ["--samples", "4"]
    with FakeApi("openai", script, MARKERS) as fake:
        command = generate_command(problems, out, fake.url, *flags, "-j", "2", "-q")
        proc = subprocess.Popen(command, env=key_env(), stdout=subprocess.PIPE, text=True)
        jsonl = out / "generations.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if jsonl.exists() and len(jsonl.read_text().splitlines()) >= 4:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first_requests = sum(fake.counts.values())
    kept = {(r["problem"], r["sample"]) for r in ledger(out)}
    assert 4 <= len(kept) < 12
    # At most the requests in flight (2) were lost.
    assert first_requests - len(kept) <= 2

    with FakeApi("openai", script, MARKERS) as fake:
        again = run(generate_command(problems, out, fake.url, *flags, "-j", "4"))
    assert again.returncode == 0, again.stderr
    assert sum(fake.counts.values()) == 12 - len(kept)
    rows = ledger(out)
    keys = [(r["problem"], r["sample"]) for r in rows]
    assert len(keys) == len(set(keys)) == 12  # nothing duplicated
    assert len(list(out.glob("level_1_problem_*_sample_*_kernel.py"))) == 12


def test_input_blind_prompt_hardware_notes_and_filter(tmp_path):
    problems = problems_dir(tmp_path)
    out = tmp_path / "gen"
    flags = ["--prompt", "input-blind", "--hardware", "H200", "--filter", "level1/3_,Nothing"]
    with FakeApi("openai", lambda p, n, prompt: ("answer", block("x = 1\n")), MARKERS) as fake:
        done = run(generate_command(problems, out, fake.url, *flags))
    assert done.returncode == 0, done.stderr
    assert fake.counts == {"3_ReLU": 1}  # the filter kept ReLU only
    prompt = fake.prompts["3_ReLU"]
    assert "Elementwise ReLU" in prompt and "def forward" in prompt
    for hidden in ("def get_inputs", "def get_init_inputs", "batch_size =", "dim =", "_LARGE"):
        assert hidden not in prompt
    assert "H200" in prompt and "load_inline" in prompt
    row = ledger(out)[0]
    assert row["prompt"] == "input-blind" and row["hardware"] == "H200"
    assert row["prompt_files_sha256"]["hardware/H200.md"] == sha256(PROMPTS / "hardware/H200.md")
    # A second problem with ReLU's level and id would share its file names: skipped, said so.
    shutil.copy(PROBLEMS / "level1" / "4_Softmax.py", problems / "level1" / "3_Twin.py")
    with FakeApi("openai", lambda p, n, prompt: ("answer", block("x = 1\n")), MARKERS) as fake:
        again = run(generate_command(problems, out, fake.url, *flags[:-2], "--filter", "level1/3"))
    assert again.returncode == 0, again.stderr
    assert "skipped problem" in again.stdout and "3_Twin.py" in again.stdout
    assert sum(fake.counts.values()) == 0


def test_input_blind_helper_keeps_what_the_model_needs():
    sys.path.insert(0, str(REPO / "python"))
    from kbv.prompt_source import input_blind

    source = (PROBLEMS / "level2" / "1_Gemm_BiasAdd_ReLU.py").read_text()
    shown = input_blind(source)
    assert "class Model" in shown and "def __init__(self, in_features" in shown
    for hidden in ("get_inputs", "get_init_inputs", "batch_size", "in_features =", "_LARGE ="):
        assert hidden not in shown
    compile(shown, "shown", "exec")

    # Constants the Model itself reads stay (with what they are computed from); a comment block
    # describing a removed constant goes with it; multi-line statements go whole.
    tricky = """import torch

SCALE = 2.0 if True else 1.0
# the batch
batch = (
    16
)
width = 8 * batch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * SCALE


def get_inputs():
    return [torch.rand(batch, width) * SCALE]
"""
    shown = input_blind(tricky)
    assert "SCALE = 2.0" in shown and "return x * SCALE" in shown
    for hidden in ("batch", "width", "16", "get_inputs"):
        assert hidden not in shown
    namespace: dict = {}
    exec(compile(shown, "shown", "exec"), namespace)  # runs as shown
    assert "Model" in namespace


def test_missing_key_is_a_clear_error(tmp_path):
    problems = problems_dir(tmp_path, names=("3_ReLU",))
    env = key_env()
    env.pop("KBV_API_KEY")
    done = run(generate_command(problems, tmp_path / "gen", "http://127.0.0.1:9/v1"), env=env)
    assert done.returncode == 2
    assert "KBV_API_KEY" in done.stderr and "KBV_NO_API_KEY" in done.stderr
    # A key that would break its header line is refused, not sent (and not printed).
    broken = run(
        generate_command(problems, tmp_path / "gen", "http://127.0.0.1:9/v1"),
        env={**env, "KBV_API_KEY": KEY + "\r\nX-Injected: 1"},
    )
    assert broken.returncode == 2 and "control character" in broken.stderr
    assert KEY not in broken.stderr
    # A local server without auth: no key, no header.
    with FakeApi("openai", lambda p, n, prompt: ("answer", block("x = 1\n")), MARKERS) as fake:
        env["KBV_NO_API_KEY"] = "1"
        done = run(generate_command(problems, tmp_path / "gen", fake.url), env=env)
    assert done.returncode == 0, done.stderr
    assert "Authorization" not in fake.headers[0]


def test_requests_per_minute_cap_spaces_requests(tmp_path):
    problems = problems_dir(tmp_path)
    with FakeApi("openai", lambda p, n, prompt: ("answer", block("x = 1\n")), MARKERS) as fake:
        done = run(
            generate_command(problems, tmp_path / "gen", fake.url, "-j", "3", "--rpm", "300")
        )
    assert done.returncode == 0, done.stderr
    gaps = [b - a for a, b in zip(fake.arrivals, fake.arrivals[1:], strict=False)]
    assert len(gaps) == 2 and min(gaps) >= 0.15  # 60/300 = 0.2 s apart, with three threads


def test_a_refused_key_stops_the_run(tmp_path):
    problems = problems_dir(tmp_path)
    with FakeApi("openai", lambda p, n, prompt: ("echo_key", 401), MARKERS) as fake:
        done = run(generate_command(problems, tmp_path / "gen", fake.url, "-j", "1"))
    assert done.returncode == 1
    assert sum(fake.counts.values()) == 1  # not retried, and nothing more was sent
    assert "HTTP 401" in done.stdout and "refused the key" in done.stdout
    # The server quoted the key in its error: kbv redacted it everywhere it wrote the error.
    assert "invalid key: Bearer [redacted]" in done.stdout
    assert "[redacted]" in ledger(tmp_path / "gen")[0]["error"]
    assert_no_key(tmp_path / "gen", done.stdout, done.stderr)


@pytest.mark.e2e
def test_end_to_end_generate_run_both_protocols_and_compare(tmp_path, cache_dir):
    """The README's sequence, small: generate against the fake server (honest candidates, and no
    code for MSELoss), evaluate under standard and verified, compare. The sample without code is
    a failed sample in every figure."""
    problems = problems_dir(tmp_path)
    answers = {
        "3_ReLU": block(honest("3_ReLU")),
        "4_Softmax": block(honest("4_Softmax")),
        "10_MSELoss": "The kernel is left as an exercise.",
    }
    out = tmp_path / "runs" / "fake-model"
    with FakeApi("openai", lambda p, n, prompt: ("answer", answers[p]), MARKERS) as fake:
        done = run(generate_command(problems, out, fake.url))
    assert done.returncode == 0, done.stderr
    quick = ["--device", "cpu", "--draws", "1", "--samples", "2", "--rounds", "1", "-q"]
    for protocol in ("standard", "verified"):
        evaluated = subprocess.run(
            [kbv_binary(), "run", "--problems", str(problems), "--candidates", str(out.parent),
             "--db", str(tmp_path / f"{protocol}.sqlite"), "--protocol", protocol,
             "--cache-dir", str(cache_dir), "--timeout", "60", *quick],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert evaluated.returncode == 0, evaluated.stderr
        assert "3 tasks: 3 evaluated now" in evaluated.stdout, evaluated.stdout
        assert "compile_error  1" in evaluated.stdout, evaluated.stdout
    compared = subprocess.run(
        [kbv_binary(), "compare", str(tmp_path / "standard.sqlite"),
         str(tmp_path / "verified.sqlite"), "--format", "json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    table = json.loads(compared.stdout)
    assert table["protocols"] == {"a": "standard", "b": "verified"}
    overall = next(g for g in table["groups"] if g["group_by"] == "overall")
    assert overall["protocol"] == "standard vs verified"
    figures = overall["figures"]
    assert figures["tasks"] == {"a": 3, "b": 3, "diff": 0}
    for side in ("a", "b"):
        assert figures["correct_rate"][side] == pytest.approx(2 / 3)  # the stub counts
        assert figures["geomean_tf32"][side] is not None
        assert figures["geomean_fp32"][side] is not None
        assert "memory_raised_share" in figures
    assert table["candidates"]["matched"] == 3
    text = subprocess.run(
        [kbv_binary(), "compare", str(tmp_path / "standard.sqlite"),
         str(tmp_path / "verified.sqlite")],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert "protocol standard vs verified" in text and "memory_raised_share" in text
    report = subprocess.run(
        [kbv_binary(), "report", str(tmp_path / "verified.sqlite"), "--format", "json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    tasks = json.loads(report.stdout)["tasks"]
    stub = next(t for t in tasks if t["problem"] == "10_MSELoss")
    assert stub["verdict"] == "compile_error"
    assert "no code block" in stub["reason"]
