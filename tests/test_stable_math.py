"""Issue 20.13: written values must not depend on where numpy's buffers happen to sit.

numpy picks its SIMD (SVML) or its libm kernel for ``arctan2`` and friends from the buffers'
addresses: an output buffer that lands right after a strided input (malloc reusing a chunk just
freed there) takes the libm path, anywhere else the SIMD one, and the two differ in the last
digit. The child processes below build both allocation histories on purpose and must agree.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from calib import stable_math

#: A child process: compute yaw and bearing of fixed inputs after an allocation history that
#: puts numpy's output buffer right after the input's (``adjacent``) or elsewhere (``apart``).
CHILD = r"""
import hashlib, sys
import numpy as np
from calib.bearing import bearing_deg
from calib.rotation import yaw_from_rotation

n = 1000
rng = np.random.default_rng(5)
yaw = rng.uniform(-3.0, 3.0, size=n)
xy = rng.normal(size=(n, 2)) * 30.0
mode = sys.argv[1]
keep = []


def placed(make, out_bytes):
    # Allocate the input, then a chunk of the output's size: if it sits right after the input
    # (16 bytes of malloc header between), free it so that the output gets it; else keep both.
    for _ in range(200):
        a = make()
        z = np.empty(out_bytes // 8)
        g = np.empty(300)
        end = a.__array_interface__["data"][0] + a.nbytes
        adjacent = z.__array_interface__["data"][0] - end == 16
        keep.append(g)
        if adjacent == (mode == "adjacent"):
            del z
            return a
        keep.append(z)
    raise SystemExit("no such allocation history")


def rotations():
    r = np.zeros((n, 3, 3))
    r[:, 0, 0] = np.cos(yaw)
    r[:, 0, 1] = -np.sin(yaw)
    r[:, 1, 0] = np.sin(yaw)
    r[:, 1, 1] = np.cos(yaw)
    r[:, 2, 2] = 1.0
    return r


h = hashlib.sha256()
h.update(yaw_from_rotation(placed(rotations, n * 8)).tobytes())
h.update(bearing_deg(placed(lambda: xy.copy(), n * 8)).tobytes())
print(h.hexdigest())
"""


def test_same_values_across_processes_with_different_allocation_histories():
    digests = {}
    for mode in ("adjacent", "apart", "adjacent", "apart"):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        digests.setdefault(mode, set()).add(done.stdout.strip())
    assert len(digests["adjacent"] | digests["apart"]) == 1, digests


@pytest.mark.parametrize(
    ("fn", "reference", "arity", "domain"),
    [
        (stable_math.arctan2, math.atan2, 2, (-5.0, 5.0)),
        (stable_math.arctan, math.atan, 1, (-5.0, 5.0)),
        (stable_math.arccos, math.acos, 1, (-1.0, 1.0)),
        (stable_math.arcsin, math.asin, 1, (-1.0, 1.0)),
        (stable_math.exp, math.exp, 1, (-5.0, 5.0)),
        (stable_math.log, math.log, 1, (0.01, 50.0)),
        (stable_math.tan, math.tan, 1, (-1.5, 1.5)),
        (stable_math.power, math.pow, 2, (0.1, 3.0)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_every_layout_gives_the_same_bits(fn, reference, arity, domain):
    rng = np.random.default_rng(0)
    n = 999
    args = [rng.uniform(*domain, size=n) for _ in range(arity)]
    expected = fn(*args)
    # Inputs packed back to back with room for an output right after them, strided views,
    # float32-representable values given as float32, 2-D shapes, scalars.
    packed = np.empty((arity + 2) * n)
    views = []
    for i, a in enumerate(args):
        packed[i * n : (i + 1) * n] = a
        views.append(packed[i * n : (i + 1) * n])
    strided = []
    for a in args:
        s = np.empty(3 * n)
        s[1::3] = a
        strided.append(s[1::3])
    for variant in (views, strided, [a.reshape(27, 37) for a in args]):
        assert fn(*variant).ravel().tobytes() == expected.tobytes()
    assert all(fn(*(a[i] for a in args)) == expected[i] for i in range(0, n, 97))
    np.testing.assert_allclose(
        expected, [reference(*(a[i] for a in args)) for i in range(n)], rtol=1e-15, atol=0
    )
    single = [a.astype(np.float32) for a in args]
    np.testing.assert_array_equal(fn(*single), fn(*(s.astype(np.float64) for s in single)))
