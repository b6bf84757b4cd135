"""The example candidates' copies of the shared CUDA blocks match their one source in
examples/shared/ (scripts/gen_examples.py writes them): an edit to one copy without
regenerating fails here. Reads text only: no GPU, no torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_examples", REPO / "scripts/gen_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()
EXAMPLES = gen.examples_with_blocks()


def test_examples_carry_the_shared_blocks():
    """Every example with its own copy of the tensor-core GEMM kernel carries it as a marked
    block (an unmarked copy would drift unchecked), and every shared source is used."""
    with_kernel = [
        p
        for p in (REPO / "examples").rglob("*.py")
        if "void __launch_bounds__(kThreads) tc_gemm_kernel(" in p.read_text()
    ]
    assert len(with_kernel) >= 7
    for path in with_kernel:
        names = [name for name, _, _ in gen.blocks(path.read_text())]
        assert "tf32_gemm.cuh" in names, path
    used = {name for p in EXAMPLES for name, _, _ in gen.blocks(p.read_text())}
    assert used == {p.name for p in gen.SHARED.iterdir() if p.suffix == ".cuh"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_example_blocks_match_shared_source(path):
    text = path.read_text()
    for name, start, end in gen.blocks(text):
        assert text[start:end] == gen.shared_source(name), (
            f"{path.relative_to(REPO)}: block {name} differs from examples/shared/{name}; "
            "edit the shared source and run python3 scripts/gen_examples.py"
        )


def test_render_replaces_only_the_marked_body():
    name = "tf32_gemm.cuh"
    text = (
        'SRC = r"""\nhead\n'
        f"// BEGIN shared examples/shared/{name}: written by scripts/gen_examples.py, edit there\n"
        "stale copy\n"
        f"// END shared examples/shared/{name}\n"
        'tail\n"""\n'
    )
    out = gen.render(text)
    assert out.startswith('SRC = r"""\nhead\n// BEGIN shared')
    assert out.endswith(f'// END shared examples/shared/{name}\ntail\n"""\n')
    assert gen.shared_source(name) in out and "stale copy" not in out
    with pytest.raises(ValueError, match="no matching END"):
        gen.blocks(text.replace("// END", "// NOT END"))
