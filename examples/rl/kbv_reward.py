"""A reward function for GRPO-style RL loops (TRL's GRPOTrainer, verl) backed by `kbv serve`.

TRL calls reward functions as `f(completions, **dataset_columns) -> list[float]`, with one
completion per sample and each dataset column repeated per sample: `kbv_reward`, with the
dataset's `problem` column holding the KernelBench problem's source.

    from examples.rl.kbv_reward import kbv_reward
    trainer = GRPOTrainer(model=..., reward_funcs=[kbv_reward], train_dataset=dataset, ...)

verl calls a custom reward function with keywords: per sample (its default reward manager)
`compute_score(data_source, solution_str, ground_truth, extra_info)`, or per step with
`reward_model.reward_manager=batch` `compute_score(data_sources, solution_strs, ground_truths,
extra_infos)`: `compute_score` and `compute_score_batch` here, the problem's source as the
sample's `ground_truth` (or `extra_info["problem"]`). Point `custom_reward_function.path` at this
file and `custom_reward_function.name` at the one that matches the manager; the batch one sends a
step's samples together.

The service's address and token come from KBV_URL and KBV_TOKEN (or KBV_TOKEN_FILE). Every
completion of a step goes to the service in one batch, so its samples of one problem share one
warm reference session there; each is scored by `shaped_reward` (docs/serve.md, "Reward
shaping"). A completion the service refuses alone (a NUL byte, over its size limit) scores 0
and costs the others nothing.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from kbv.client import Client

# Options of every request: the verified protocol (the default), quick timing for RL throughput.
REQUEST_OPTIONS: dict[str, Any] = {"profile": "quick"}

_CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def completion_text(completion: Any) -> str:
    """A completion as text: TRL passes strings, or chat messages ([{"role", "content"}])."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if m.get("role") == "assistant")
    if isinstance(completion, dict):
        return completion.get("content", "")
    return str(completion)


def extract_code(completion: Any) -> str | None:
    """The first fenced code block of a completion, or None when it has none."""
    match = _CODE_BLOCK.search(completion_text(completion))
    if not match or not match.group(1).strip():
        return None
    return match.group(1)


def shaped_reward(job: dict | None) -> float:
    """One number from a finished job (docs/serve.md):
    no code or a harness error: 0; compile, runtime or timeout failure: 0; incorrect: 0.1;
    a detected hack (rejected): -1; correct: 1 plus log2 of the speedup's lower confidence bound
    (vs TF32 under the verified protocol), between 0 and 2, nothing for a tie; minus up to 0.5
    for raising peak memory."""
    if not job or job.get("status") != "done" or not job.get("reward"):
        return 0.0
    r = job["reward"]
    if r["hacked"]:
        return -1.0
    if r["harness_error"]:
        return 0.0
    if not r["correct"]:
        return 0.1 if r["verdict"] == "incorrect" else 0.0
    reward = 1.0
    speedup = r.get("speedup")
    if speedup and not speedup.get("tie") and speedup.get("ci_low"):
        reward += min(2.0, max(0.0, math.log2(speedup["ci_low"])))
    ratio = r.get("memory_ratio")
    if ratio and ratio > 1.0:
        reward -= min(0.5, 0.1 * math.log2(ratio))
    return reward


def default_client() -> Client:
    token = os.environ.get("KBV_TOKEN")
    if not token:
        token = Path(os.environ["KBV_TOKEN_FILE"]).read_text().strip()
    return Client(os.environ.get("KBV_URL", "http://127.0.0.1:8000"), token)


def kbv_reward(
    completions: list[Any], problem: str | list[str], client: Client | None = None, **kwargs: Any
) -> list[float]:
    """One reward per completion; `problem` is one source or one per completion."""
    client = client or default_client()
    problems = problem if isinstance(problem, list) else [problem] * len(completions)
    codes = [extract_code(c) for c in completions]
    requests = [
        {"problem": p, "candidate": code, **REQUEST_OPTIONS}
        for p, code in zip(problems, codes, strict=True)
        if code is not None
    ]
    jobs = iter(client.batch(requests) if requests else [])
    return [shaped_reward(next(jobs)) if code is not None else 0.0 for code in codes]


def _problem_of(ground_truth: Any, extra_info: Any) -> str:
    if isinstance(extra_info, dict) and isinstance(extra_info.get("problem"), str):
        return extra_info["problem"]
    if not isinstance(ground_truth, str):
        raise TypeError(
            "kbv's verl reward needs the problem's source as the sample's ground_truth "
            f"(or extra_info['problem']), not {type(ground_truth).__name__}"
        )
    return ground_truth


def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Any = None,
    client: Client | None = None,
    **kwargs: Any,
) -> float:
    """verl's per-sample custom reward: one completion, its problem's source as ground_truth."""
    return kbv_reward([solution_str], _problem_of(ground_truth, extra_info), client=client)[0]


def compute_score_batch(
    data_sources: list[Any] | None = None,
    solution_strs: list[str] | None = None,
    ground_truths: list[Any] | None = None,
    extra_infos: list[Any] | None = None,
    client: Client | None = None,
    **kwargs: Any,
) -> list[float]:
    """verl's batch reward manager: a step's completions in one request to the service."""
    solutions = list(solution_strs or [])
    truths = list(ground_truths or [None] * len(solutions))
    extras = list(extra_infos or [None] * len(solutions))
    problems = [_problem_of(g, e) for g, e in zip(truths, extras, strict=True)]
    return kbv_reward(solutions, problems, client=client)
