"""Where a stage's seconds go: its own work (wall and CPU) apart from numba compilation.

A fresh process (a Ray worker, the first clip of a local run) compiles the numba kernels it calls
on first use, unless numba's on-disk cache already holds them (``cache=True`` caches next to the
source, so a job whose code is shipped to a new working directory compiles again on every node).
That is start-up, not the stage's work: counted apart so that a stage table reads the same on a
warm process and a cold one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_listener = None


def _compile_listener():
    """The process's numba compile listener, registered on first use."""
    global _listener
    with _lock:
        if _listener is None:
            from numba.core import event

            class CompileSeconds(event.Listener):
                """Seconds of outermost ``numba:compile`` events (a kernel that compiles the
                kernels it calls reports them nested inside its own; they are counted once)."""

                def __init__(self) -> None:
                    self.depth = 0
                    self.started = (0.0, 0.0)
                    self.total = 0.0
                    self.total_cpu = 0.0

                def on_start(self, ev) -> None:
                    if self.depth == 0:
                        self.started = (time.perf_counter(), time.process_time())
                    self.depth += 1

                def on_end(self, ev) -> None:
                    self.depth -= 1
                    if self.depth == 0:
                        self.total += time.perf_counter() - self.started[0]
                        self.total_cpu += time.process_time() - self.started[1]

            _listener = CompileSeconds()
            event.register("numba:compile", _listener)
    return _listener


def compile_seconds() -> tuple[float, float]:
    """Wall and CPU seconds this process has spent compiling numba kernels since the clock was
    first read."""
    listener = _compile_listener()
    return listener.total, listener.total_cpu


@dataclass
class Lap:
    """One timed call: ``work_s`` (wall seconds less compilation), ``cpu_s`` (this process's CPU
    seconds, all threads, less compilation), ``compile_s`` (numba compilation, wall seconds)."""

    work_s: float = 0.0
    cpu_s: float = 0.0
    compile_s: float = 0.0

    def __iadd__(self, other: Lap) -> Lap:
        self.work_s += other.work_s
        self.cpu_s += other.cpu_s
        self.compile_s += other.compile_s
        return self


def timed(fn: Callable[[], T]) -> tuple[T | None, Lap, BaseException | None]:
    """Call ``fn()``; its result (None when it raised), its :class:`Lap`, and the exception."""
    compiled0, compiled_cpu0 = compile_seconds()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result: Any = None
    error: BaseException | None = None
    try:
        result = fn()
    except Exception as exc:  # the caller records it against the clip
        error = exc
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    compiled, compiled_cpu = compile_seconds()
    compiled, compiled_cpu = compiled - compiled0, compiled_cpu - compiled_cpu0
    lap = Lap(max(0.0, wall - compiled), max(0.0, cpu - compiled_cpu), compiled)
    return result, lap, error
