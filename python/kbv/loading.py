"""Imports problem and candidate files as modules, and turns every way that can fail into a
classified error the orchestrator can turn into a verdict."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from types import ModuleType


class WorkerError(Exception):
    """A failure with a kind the orchestrator maps to a verdict or a usage error.

    kinds: problem_error (the problem is malformed: a usage error of kbv), compile_error
    (the candidate does not import or build), runtime_error (construction or forward raised),
    output_error (the forward returned something that is not a tensor result).
    """

    def __init__(self, kind: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail


def trim(text: str, limit: int = 4000) -> str:
    """Keeps the head and tail of long compiler output: the first error and the summary."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n... [{len(text) - limit} characters cut] ...\n" + text[-half:]


def import_file(path: str, role: str) -> ModuleType:
    file = Path(path)
    if not file.is_file():
        raise WorkerError(
            "problem_error" if role == "problem" else "compile_error", f"{path} is not a file"
        )
    name = f"kbv_{role}_{hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise WorkerError("compile_error", f"{path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        kind = "problem_error" if role == "problem" else "compile_error"
        raise WorkerError(
            kind, f"syntax error in {file.name} line {error.lineno}: {error.msg}"
        ) from error
    except BaseException as error:  # noqa: BLE001 - any failure at import is the file's fault
        kind = "problem_error" if role == "problem" else "compile_error"
        raise WorkerError(
            kind, _import_failure_message(file, error), trim(traceback.format_exc())
        ) from error
    return module


def _import_failure_message(file: Path, error: BaseException) -> str:
    text = str(error)
    if "Error building extension" in text or "ninja" in text.lower():
        # torch.utils.cpp_extension puts the compiler's output in the message.
        return f"the extension in {file.name} failed to build:\n{trim(text)}"
    return f"importing {file.name} raised {type(error).__name__}: {trim(text, 1500)}"


def require(module: ModuleType, attribute: str, kind: str, what: str):
    value = getattr(module, attribute, None)
    if value is None:
        raise WorkerError(kind, f"{what} does not define {attribute}")
    return value


def construct(cls: type, init_inputs: list, role: str):
    """Builds Model/ModelNew; a signature mismatch is reported in terms the author can act on."""
    try:
        return cls(*init_inputs)
    except TypeError as error:
        try:
            signature = str(inspect.signature(cls.__init__))
        except (TypeError, ValueError):
            signature = "(unknown)"
        kind = "problem_error" if role == "problem" else "runtime_error"
        raise WorkerError(
            kind,
            f"{cls.__name__}{signature} cannot be constructed from get_init_inputs() = "
            f"{_describe(init_inputs)}: {error}",
            trim(traceback.format_exc()),
        ) from error
    except BaseException as error:  # noqa: BLE001
        kind = "problem_error" if role == "problem" else "runtime_error"
        raise WorkerError(
            kind,
            f"{cls.__name__}(...) raised {type(error).__name__}: {trim(str(error), 1500)}",
            trim(traceback.format_exc()),
        ) from error


def _describe(values: list) -> str:
    text = repr(values)
    return text if len(text) < 200 else text[:200] + "..."
