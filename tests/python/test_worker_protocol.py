"""The worker protocol as kbv declares it (src/orchestrate/worker_protocol.cpp, printed by
`kbv worker-protocol`) against the Python handlers, both ways: every command the orchestrator
may send to a role has a `cmd_<name>` handler on that role, and every handler is declared. Also
the static scan's finding ids against kbv's flag catalogue (`kbv flag-catalogue`), and no
command name written as a bare literal in the C++ sources outside the declaration."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import kbv_binary

ROOT = Path(__file__).resolve().parents[2]
# Handled by the serve loop itself (python/kbv/worker.py), not by a role.
SERVE_LOOP = {"exit"}


def _kbv_json(*args: str):
    out = subprocess.run([kbv_binary(), *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# Read with `ast`, not imported: the roles need torch and kbv_native, the contract does not.
ROLES = {
    "reference": (ROOT / "python" / "kbv" / "reference.py", "ReferenceRole"),
    "candidate": (ROOT / "python" / "kbv" / "candidate.py", "CandidateRole"),
}


def _handlers(role: str) -> set[str]:
    path, class_name = ROLES[role]
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            assert not node.bases, f"{class_name} inherits: read its bases too"
            return {
                item.name[len("cmd_") :]
                for item in node.body
                if isinstance(item, ast.FunctionDef) and item.name.startswith("cmd_")
            }
    raise AssertionError(f"{class_name} not found in {path}")


@pytest.fixture(scope="module")
def declared() -> dict[str, set[str]]:
    by_role: dict[str, set[str]] = {"reference": set(), "candidate": set()}
    for command in _kbv_json("worker-protocol"):
        for role in command["roles"]:
            by_role[role].add(command["name"])
    return by_role


def test_every_declared_command_has_a_handler_on_its_role(declared):
    for role in ROLES:
        missing = declared[role] - SERVE_LOOP - _handlers(role)
        assert not missing, f"{role} role lacks handlers for {sorted(missing)}"


def test_every_handler_is_declared_for_its_role(declared):
    for role in ROLES:
        undeclared = _handlers(role) - declared[role]
        assert not undeclared, f"{role} handlers not declared in C++: {sorted(undeclared)}"


def test_requests_are_built_from_the_declaration_only():
    # A bare {"cmd", "name"} literal would bypass worker_request(), which refuses undeclared names.
    pattern = re.compile(r'\{"cmd",\s*"')
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "src").rglob("*.[ch]pp")
        if path.name != "worker_protocol.cpp"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, offenders


def test_static_scan_ids_are_catalogued_flags():
    from kbv import scan

    catalogue = {flag["id"]: set(flag["severities"]) for flag in _kbv_json("flag-catalogue")}
    for finding, (severity, _meaning) in scan.FINDINGS.items():
        assert finding in catalogue, f"scan finding {finding} is not in the flag catalogue"
        assert severity in catalogue[finding], finding


# -- the channel's turns (python/kbv/channel.py, worker.py) -------------------------------------
def test_every_answer_names_its_request_and_goes_through_a_private_descriptor(tmp_path):
    """The worker echoes each request's `seq` (ok, error and unknown-command answers alike) and
    writes through a copy of its answer descriptor made at start: pointing the descriptor it
    was handed (--out) elsewhere, as a forger that swallows the real answer would, changes
    nothing."""
    import json
    import os

    from kbv import worker
    from kbv.channel import Channel
    from kbv.loading import WorkerError

    class Role:
        def cmd_ok(self, request):
            return {"fine": True}

        def cmd_fail(self, request):
            raise WorkerError("runtime_error", "no")

    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    channel = Channel(to_r, from_w)
    junk_r, junk_w = os.pipe()
    os.dup2(junk_w, from_w)  # the named descriptor now leads elsewhere
    for seq, cmd in ((1, "ok"), (2, "fail"), (3, "nope")):
        os.write(to_w, (json.dumps({"cmd": cmd, "seq": seq}) + "\n").encode())
    os.write(to_w, b'{"cmd": "exit", "seq": 4}\n')
    worker.serve(Role(), channel)
    answers = [json.loads(line) for line in os.read(from_r, 1 << 16).decode().splitlines()]
    assert [a["seq"] for a in answers] == [1, 2, 3]
    assert [a["ok"] for a in answers] == [True, False, False]
    os.set_blocking(junk_r, False)
    try:
        assert os.read(junk_r, 100) == b""
    except BlockingIOError:
        pass  # nothing was written there
    for fd in (to_w, from_r, from_w, junk_r, junk_w):
        os.close(fd)
