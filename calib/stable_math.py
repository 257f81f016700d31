"""Transcendental functions whose last digit does not depend on where the arrays sit in memory.

numpy (1.26 on AVX-512 machines) evaluates ``arctan2``, ``arctan``, ``arcsin``, ``arccos``,
``exp``, ``log``, ``tan``, ``power`` and others with SVML SIMD kernels unless the output buffer
may overlap an input, judged from the buffers' addresses (an output that starts right after an
input counts as overlapping); then it falls back to libm. The two differ in the last digit for
about a third of the values, so the same input gave different bytes from run to run, depending
on the allocation history of the process (issue 20.13).

Every function here copies its inputs into rows of one fresh buffer and writes the result into
the buffer's last row: the relative layout that numpy inspects is then always the same, so the
same path, and the same bits, are chosen every time. Results are float64 arrays of the
broadcast shape (numpy float64 scalars for scalar input). Use these wherever a value can reach an
output file.
"""

from __future__ import annotations

import numpy as np


def _fixed_layout(ufunc: np.ufunc, *args) -> np.ndarray:
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in args))
    shape = arrays[0].shape
    work = np.empty((len(arrays) + 1, arrays[0].size), dtype=np.float64)
    for row, a in zip(work, arrays, strict=False):
        row[:] = a.ravel()
    ufunc(*work[:-1], out=work[-1])
    out = work[-1].reshape(shape).copy()
    return out[()] if out.ndim == 0 else out


def arctan2(y, x) -> np.ndarray:
    """``np.arctan2(y, x)`` in radians, the same bits for the same values in any layout."""
    return _fixed_layout(np.arctan2, y, x)


def arctan(x) -> np.ndarray:
    return _fixed_layout(np.arctan, x)


def arccos(x) -> np.ndarray:
    return _fixed_layout(np.arccos, x)


def arcsin(x) -> np.ndarray:
    return _fixed_layout(np.arcsin, x)


def exp(x) -> np.ndarray:
    return _fixed_layout(np.exp, x)


def log(x) -> np.ndarray:
    return _fixed_layout(np.log, x)


def tan(x) -> np.ndarray:
    return _fixed_layout(np.tan, x)


def power(x, y) -> np.ndarray:
    return _fixed_layout(np.power, x, y)
