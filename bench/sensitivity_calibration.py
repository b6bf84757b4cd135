"""How close an honest TF32 kernel comes to the verified budgets, by the budgets' own model.

The verified policy (docs/protocol.md "Correctness") judges floating outputs against the float64
truth t with budgets opened by each element's rounding sensitivity s_i: the RMS over m float64
runs of how far t_i moves when every float input and parameter element is scaled by (1 + u r),
r a standard normal (or a random sign: --law), u = 2^-11 (TF32). This script draws a problem's
cases as kbv does (its hidden families), runs an emulated honest TF32 kernel (inputs and
parameters rounded to TF32, the arithmetic in float32: what a tensor-core kernel does), and
reports, per draw and per m, the
margins the policy would record:

- elementwise: max_i |c_i - t_i| / max(F (|t_i| + scale), K s_i)
- normwise: ||c - t|| / ||t|| over sigma = ||s|| / ||t||, the sensitivity's own normwise figure

An honest error over s_i is t-distributed with m degrees of freedom (s_i is an estimate from m
runs), so the elementwise margin's tail is what m and K are set from; the normwise figure of an
honest TF32 kernel should sit near 1/sqrt(3) of sigma (a uniform rounding error has RMS u/sqrt(3)
against the perturbation's u). CPU only, float64; pick sizes that fit (module globals of the
problem are overridden with --set name=value).

    python bench/sensitivity_calibration.py problems/level2/3_Conv2d_Add_Tanh.py \
        --family h3_wide_range --draws 20 --set batch_size=8 --set height=64 --set width=64 \
        --set in_channels=32 --set out_channels=64
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from kbv import families, loading  # noqa: E402

U_TF32 = 2.0**-11


def load_problem(path: Path, overrides: dict[str, int]):
    module = loading.import_file(str(path), "problem")
    for name, value in overrides.items():
        if not hasattr(module, name):
            raise SystemExit(f"{path.name} has no module global '{name}' to override")
        setattr(module, name, value)
    return module


def to_tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32's 10 mantissa bits, to nearest even (as cvt.rn.tf32)."""
    bits = x.float().contiguous().view(torch.int32)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return bits.view(torch.float32)


def float_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if v.is_floating_point()}


def run(model: torch.nn.Module, state: dict, inputs: list, dtype: torch.dtype) -> torch.Tensor:
    m = copy.deepcopy(model).to(dtype)
    m.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False)
    with torch.no_grad():
        out = m(*[x.to(dtype) if families.is_float(x) else x for x in inputs])
    return (out[0] if isinstance(out, (tuple, list)) else out).to(torch.float64)


def sensitivity_runs(
    model, state, inputs, truth, runs: int, gen: torch.Generator, law: str
) -> list:
    """|f64(perturbed) - truth|^2 of each run (the caller takes the RMS over the first m)."""

    def perturbed(t: torch.Tensor) -> torch.Tensor:
        if law == "gaussian":
            r = torch.randn(t.shape, generator=gen, dtype=torch.float64)
        else:
            r = torch.randint(0, 2, t.shape, generator=gen).to(torch.float64) * 2 - 1
        return t.to(torch.float64) * (1 + U_TF32 * r)

    squares = []
    for _ in range(runs):
        state_p = {k: perturbed(v) for k, v in state.items()}
        inputs_p = [perturbed(x) if families.is_float(x) else x for x in inputs]
        squares.append((run(model, state_p, inputs_p, torch.float64) - truth).square())
    return squares


def margins(candidate, truth, s, floor_rel: float, k: float) -> tuple[float, float, float]:
    """Elementwise margin, normwise over sigma, and the normwise error over the elements the
    sensitivity does not open (K s_i within the floor): the well-conditioned part."""
    scale = truth.square().mean().sqrt()
    floor = floor_rel * (truth.abs() + scale)
    budget = torch.maximum(floor, k * s)
    elem = ((candidate - truth).abs() / budget).max().item()
    sigma = (s.norm() / truth.norm()).item()
    norm = ((candidate - truth).norm() / truth.norm()).item()
    conditioned = k * s <= floor
    t_c = truth[conditioned]
    norm_c = ((candidate[conditioned] - t_c).norm() / t_c.norm()).item() if t_c.numel() else 0.0
    return elem, norm / sigma if sigma > 0 else math.inf, norm_c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--family", default="h3_wide_range")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--runs", default="2,4,8", help="values of m to compare")
    parser.add_argument("--k", type=float, default=16.0, help="K of the elementwise budget")
    parser.add_argument("--floor", type=float, default=1e-2, help="F of the elementwise floor")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--law",
        choices=("gaussian", "rademacher"),
        default="gaussian",
        help="of the perturbation r (kbv's worker: gaussian since protocol version 4)",
    )
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    overrides = {k: int(v) for k, v in (s.split("=", 1) for s in args.set)}
    ms = sorted({int(m) for m in args.runs.split(",")})
    module = load_problem(args.problem, overrides)
    torch.manual_seed(args.seed)
    model = module.Model(*module.get_init_inputs())
    state = float_state(model)
    template = module.get_inputs()
    rows = []
    for draw in range(args.draws):
        gen = torch.Generator().manual_seed(args.seed * 1000 + draw)
        inputs = families.hidden_inputs(args.family, draw, template, gen, set())
        truth = run(model, state, inputs, torch.float64)
        tf32_state = {k: to_tf32(v) for k, v in state.items()}
        tf32_inputs = [to_tf32(x) if families.is_float(x) else x for x in inputs]
        candidate = run(model, tf32_state, tf32_inputs, torch.float32)
        squares = sensitivity_runs(model, state, inputs, truth, max(ms), gen, args.law)
        row = {"draw": draw, "normwise": ((candidate - truth).norm() / truth.norm()).item()}
        for m in ms:
            s = (sum(squares[:m]) / m).sqrt()
            elem, norm_over_sigma, norm_conditioned = margins(
                candidate, truth, s, args.floor, args.k
            )
            row[f"m{m}"] = {
                "elementwise_margin": elem,
                "normwise_over_sigma": norm_over_sigma,
                "normwise_conditioned": norm_conditioned,
                "sigma": (s.norm() / truth.norm()).item(),
            }
        rows.append(row)
        print(
            f"draw {draw}: normwise {row['normwise']:.3g}; "
            + "; ".join(
                f"m={m}: elem {row[f'm{m}']['elementwise_margin']:.3f}, "
                f"norm/sigma {row[f'm{m}']['normwise_over_sigma']:.3f}, "
                f"normwise conditioned {row[f'm{m}']['normwise_conditioned']:.3g}"
                for m in ms
            ),
            flush=True,
        )
    summary = {
        f"m{m}": {
            "elementwise_margin_max": max(r[f"m{m}"]["elementwise_margin"] for r in rows),
            "normwise_over_sigma_max": max(r[f"m{m}"]["normwise_over_sigma"] for r in rows),
            "normwise_over_sigma_min": min(r[f"m{m}"]["normwise_over_sigma"] for r in rows),
            "normwise_conditioned_max": max(r[f"m{m}"]["normwise_conditioned"] for r in rows),
        }
        for m in ms
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "problem": str(args.problem),
                    "family": args.family,
                    "k": args.k,
                    "law": args.law,
                    "floor": args.floor,
                    "overrides": overrides,
                    "draws": rows,
                    "summary": summary,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
