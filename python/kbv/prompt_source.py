"""The problem source a `kbv generate` prompt shows, and where the prompt templates are.

Run by the orchestrator as `python -m kbv.prompt_source [--input-blind] FILE...`; prints one JSON
object: {"prompts_dir": ..., "example_model": text, "sources": {FILE: text}, "errors": {...}}
(the prompt's example Model is shown the way the problems are). It never imports the problem:
the source is read and parsed with `ast`, so nothing a problem file runs at import time happens
here.

Input-blind (`--input-blind`) removes what tells the model the inputs' sizes: `get_inputs`,
`get_init_inputs`, and the module-level constants they use (directly or through other
constants), except those the code that stays reads (a size the Model itself uses stays: the
shown source must still run); then module-level constant expressions nothing shown reads.
Removal cuts the nodes' own lines (decorators and a comment block right above included) out of
the original text, so the comments and layout of what stays are the author's. Python's own
parser is used rather than a pass in C++ because a problem is Python: line continuations, nested
brackets, conditional expressions, decorators and scopes need no special cases here.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs")


def _assigned_names(node: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    names: set[str] = set()
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
    return names


def _used_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _free_names(node: ast.AST) -> set[str]:
    """Names read in `node` that it does not bind itself (parameters, local assignments, loop
    and comprehension targets): an approximation of the globals it reads, enough to tell a
    Model's `in_features` parameter from the module's `in_features` constant."""
    bound: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            bound.add(sub.id)
    return _used_names(node) - bound


_CONSTANT_NODES = (
    ast.Constant, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
    ast.Tuple, ast.List, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip


def _is_constant_expression(value: ast.AST) -> bool:
    return all(isinstance(n, _CONSTANT_NODES) for n in ast.walk(value))


def _value_of(node: ast.stmt) -> ast.AST | None:
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        return node.value
    return None


def removed_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module-level statements input-blind leaves out."""
    body = tree.body
    removed: set[int] = set()
    wanted: set[str] = set()
    for i, node in enumerate(body):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name in INPUT_FUNCTIONS
        ):
            removed.add(i)
            wanted |= _used_names(node)
    # The constants the input functions read, and those these are computed from.
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(body):
            if i in removed:
                continue
            names = _assigned_names(node)
            if names and names & wanted:
                removed.add(i)
                value = _value_of(node)
                if value is not None:
                    wanted |= _used_names(value)
                changed = True
    # A constant that code shown still reads (a size the Model itself uses) stays, with what it
    # is computed from: the shown source must run as it is.
    changed = True
    while changed:
        changed = False
        kept_uses: set[str] = set()
        for i, node in enumerate(body):
            if i not in removed:
                # A def or class reads what it does not bind; a module-level statement reads
                # every name it loads.
                scoped = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                kept_uses |= _free_names(node) if scoped else _used_names(node)
        for i in sorted(removed):
            node = body[i]
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if _assigned_names(node) & kept_uses:
                    removed.discard(i)
                    changed = True
    # Constant expressions nothing shown reads (KernelBench's leftover `dim = 1`): sizes too.
    changed = True
    while changed:
        changed = False
        kept_uses = set()
        for i, node in enumerate(body):
            if i not in removed:
                scoped = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                kept_uses |= _free_names(node) if scoped else _used_names(node)
        for i, node in enumerate(body):
            names = _assigned_names(node)
            value = _value_of(node)
            if (
                i not in removed
                and names
                and value is not None
                and _is_constant_expression(value)
                and not names & kept_uses
                and not any(n.startswith("__") for n in names)
            ):
                removed.add(i)
                changed = True
    return [body[i] for i in sorted(removed)]


def input_blind(source: str) -> str:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()  # 0-based line numbers
    for node in removed_statements(tree):
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        end = node.end_lineno or node.lineno
        drop.update(range(first - 1, end))
        # A comment block right above a removed statement describes it: it goes too.
        above = first - 2
        while above >= 0 and lines[above].lstrip().startswith("#"):
            drop.add(above)
            above -= 1
    kept = [line for i, line in enumerate(lines) if i not in drop]
    text = "".join(kept)
    # Runs of blank lines left by the cuts collapse to PEP 8's two.
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    return text.rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbv.prompt_source")
    parser.add_argument("--input-blind", action="store_true")
    parser.add_argument("--example", type=Path, default=PROMPTS_DIR / "example_model.py")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    sources: dict[str, str] = {}
    errors: dict[str, str] = {}
    for name in args.files:
        text = Path(name).read_text()
        try:
            sources[name] = input_blind(text) if args.input_blind else text
        except SyntaxError as error:
            errors[name] = f"{error.msg} (line {error.lineno})"
    # The prompt's example Model is shown the way the problem is.
    example = args.example.read_text()
    answer = {
        "prompts_dir": str(PROMPTS_DIR),
        "example_model": input_blind(example) if args.input_blind else example,
        "sources": sources,
        "errors": errors,
    }
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
