"""kbv: KernelBench-Verified.

The engine (orchestration, checking, statistics, reports, CLI) is the C++ program `kbv`. This
package is the thin Python side: the worker that hosts PyTorch problems and candidates in their
own processes (`python -m kbv.worker`).
"""

__version__ = "0.1.0"
