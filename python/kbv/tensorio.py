"""Tensors to and from files (safetensors: a plain header plus raw bytes that the C++ engine
maps without copying). Outputs are written as `<prefix>.out<i>`."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def plain(t: torch.Tensor) -> torch.Tensor:
    """A contiguous host copy with no subclass and no shared storage, as safetensors needs."""
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)
    t = t.detach().contiguous()
    if t.device.type != "cpu":
        # The copy to the host is already fresh storage; a second copy would only double the
        # host traffic (4 GB per problem at KernelBench's matmul sizes).
        return t.to("cpu")
    return t.clone()


def save(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({k: plain(v) for k, v in tensors.items()}, str(tmp), metadata=metadata)
    tmp.replace(path)


def save_inputs(path: Path, inputs: list) -> None:
    """Tensor inputs by position; non-tensor inputs (ints, floats) go in the metadata."""
    tensors = {f"in{i}": v for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)}
    scalars = {f"in{i}": repr(v) for i, v in enumerate(inputs) if not isinstance(v, torch.Tensor)}
    save(path, tensors, {"count": str(len(inputs)), **scalars})


def load_inputs(path: Path, device: torch.device) -> list:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        count = int(metadata["count"])
        inputs = []
        for i in range(count):
            key = f"in{i}"
            if key in metadata:
                import ast

                inputs.append(ast.literal_eval(metadata[key]))
            else:
                inputs.append(handle.get_tensor(key).to(device))
    return inputs


def load_state(path: Path, device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in load_file(str(path)).items()}


def output_tensors(prefix: str, outputs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{prefix}.out{i}": t for i, t in enumerate(outputs)}
