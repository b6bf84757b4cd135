"""A fake model API on loopback for kbv generate's tests and the README's end-to-end sequence:
OpenAI's chat completions or Anthropic's messages, answering from a script.

As a program it answers every problem of a tree with the problem's honest candidate from a
candidate tree (plain layout, `level1/3_ReLU.py`), and with text without code for the problems
named by --no-code:

    python3 tests/python/fake_llm.py --problems problems --candidates examples/candidates/cpu \
        --port 8765 [--api anthropic] [--no-code level1/4_Softmax]
"""

from __future__ import annotations

import argparse
import ast
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def block(text: str, lang: str = "python") -> str:
    return f"```{lang}\n{text}```\n"


def docstring_marker(problem: Path) -> str:
    """The first line of the problem's Model docstring: in the prompt whether or not it is
    input-blind."""
    for node in ast.parse(problem.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            doc = ast.get_docstring(node)
            if doc:
                return doc.splitlines()[0]
    raise ValueError(f"{problem}: Model has no docstring to recognise it by")


class FakeApi:
    """A loopback server speaking OpenAI's chat completions or Anthropic's messages. `script`
    maps a problem to a function (n-th request for it, prompt) -> action:
    ("answer", text[, finish]), ("status", code[, retry_after]), ("sleep", seconds, then-action),
    ("echo_key", code): an error quoting the key it was sent,
    ("cut",): a body shorter than its Content-Length."""

    def __init__(self, api: str, script, markers: dict[str, str], port: int = 0):
        self.api = api
        self.script = script
        self.counts: Counter[str] = Counter()
        self.prompts: dict[str, str] = {}
        self.headers: list[dict[str, str]] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][0]["content"]
                problem = next((p for p, m in markers.items() if m in prompt), "?")
                with fake.lock:
                    n = fake.counts[problem]
                    fake.counts[problem] += 1
                    fake.prompts[problem] = prompt
                    fake.headers.append(dict(self.headers))
                    fake.arrivals.append(time.monotonic())
                fake.act(self, fake.script(problem, n, prompt))

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer_body(self, text: str, finish: str) -> bytes:
        if self.api == "openai":
            answer = {
                "choices": [{"message": {"role": "assistant", "content": text},
                             "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
            }  # fmt: skip
        else:
            stop = {"stop": "end_turn", "length": "max_tokens"}[finish]
            answer = {
                "content": [{"type": "text", "text": text}],
                "stop_reason": stop,
                "usage": {"input_tokens": 10, "output_tokens": 20},
            }
        return json.dumps(answer).encode()

    def act(self, handler, action):
        kind = action[0]
        if kind == "sleep":
            time.sleep(action[1])
            action = action[2]
            kind = action[0]
        try:
            if kind == "answer":
                finish = action[2] if len(action) > 2 else "stop"
                self.send(handler, 200, self.answer_body(action[1], finish))
            elif kind == "echo_key":  # a careless server that quotes the key in its error
                said = handler.headers.get("Authorization") or handler.headers.get("x-api-key")
                body = json.dumps({"error": f"invalid key: {said}"}).encode()
                self.send(handler, action[1], body)
            elif kind == "status":
                extra = {"Retry-After": action[2]} if len(action) > 2 else {}
                self.send(handler, action[1], b'{"error": {"message": "busy"}}', extra)
            elif kind == "cut":
                body = self.answer_body(block("x = 1\n"), "stop")
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body[: len(body) // 2])
                handler.wfile.flush()
                handler.close_connection = True
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
            pass

    @staticmethod
    def send(handler, code, body, extra=None):
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(body)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, required=True)
    parser.add_argument("--candidates", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--api", choices=["openai", "anthropic"], default="openai")
    parser.add_argument("--no-code", action="append", default=[], help="e.g. level1/4_Softmax")
    args = parser.parse_args()
    markers, answers = {}, {}
    for path in sorted(args.problems.glob("level*/*.py")):
        name = f"{path.parent.name}/{path.stem}"
        markers[name] = docstring_marker(path)
        candidate = args.candidates / path.parent.name / path.name
        if name in args.no_code or not candidate.exists():
            answers[name] = "I would rather explain the idea than write the code."
        else:
            answers[name] = "Here it is.\n" + block(candidate.read_text())

    def script(problem, n, prompt):
        return ("answer", answers.get(problem, "Which problem is this?"))

    fake = FakeApi(args.api, script, markers, port=args.port)
    print(f"fake {args.api} API on {fake.url}", flush=True)
    fake.server.serve_forever()


if __name__ == "__main__":
    main()
