"""Write the shared CUDA blocks into the example candidates that carry copies of them.

An example candidate is one self-contained .py file (its `load_inline` source strings hold all
its CUDA code; kbv evaluates the file as-is), so code that several examples share is copied
into each of them. The one source of each shared block is `examples/shared/<name>`; in an
example the copy sits between two marker comments inside the CUDA source string:

    // BEGIN shared examples/shared/<name>: written by scripts/gen_examples.py, edit there
    ...the text of examples/shared/<name>, byte for byte...
    // END shared examples/shared/<name>

Edit the source in examples/shared/, then run `python3 scripts/gen_examples.py` to rewrite
every copy; `--check` only reports the examples whose copies differ (exit status 1).
tests/python/test_examples_generated.py runs the check."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SHARED = EXAMPLES / "shared"

_BEGIN = re.compile(
    r"^// BEGIN shared examples/shared/(?P<name>[\w.-]+): "
    r"written by scripts/gen_examples\.py, edit there\n",
    re.M,
)
_END = "// END shared examples/shared/{name}\n"


def shared_source(name: str) -> str:
    path = SHARED / name
    if not path.is_file():
        raise ValueError(f"no shared source {path.relative_to(REPO)}")
    return path.read_text()


def blocks(text: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of each marked block's body in `text`: text[start:end] is the copy."""
    found = []
    pos = 0
    while (m := _BEGIN.search(text, pos)) is not None:
        name = m.group("name")
        end = text.find(_END.format(name=name), m.end())
        if end < 0:
            raise ValueError(f"BEGIN shared {name} has no matching END marker")
        found.append((name, m.end(), end))
        pos = end
    return found


def render(text: str) -> str:
    """`text` with every marked block's body replaced by its shared source."""
    out = []
    pos = 0
    for name, start, end in blocks(text):
        out.append(text[pos:start])
        out.append(shared_source(name))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def examples_with_blocks() -> list[Path]:
    """Every example .py that carries at least one marked shared block."""
    return sorted(
        p
        for p in EXAMPLES.rglob("*.py")
        if SHARED not in p.parents and _BEGIN.search(p.read_text()) is not None
    )


def stale() -> list[Path]:
    """The examples whose copies differ from the shared sources."""
    return [p for p in examples_with_blocks() if render(p.read_text()) != p.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="only list the stale examples (exit status 1 if any)"
    )
    args = parser.parse_args(argv)
    paths = stale()
    for path in paths:
        rel = path.relative_to(REPO)
        if args.check:
            print(f"stale: {rel}", file=sys.stderr)
        else:
            path.write_text(render(path.read_text()))
            print(f"wrote {rel}")
    return 1 if args.check and paths else 0


if __name__ == "__main__":
    sys.exit(main())
