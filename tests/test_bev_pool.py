"""The plain-PyTorch BEV pooling against independent computations of the CUDA op's semantics.

The CUDA extension sums each interval of rank-sorted points into the voxel of its first point, in
a zero-filled (B, D, H, W, C) grid; its backward gives each point its voxel's gradient. The
expected values here come from numpy (``np.add.at`` over the same voxel indices, a sequential
float32 loop as the kernel runs, fancy indexing for the gradient) and from hand-computed cases.
Where an mmdetection3d checkout is named by ``MMDET3D_ROOT`` (not in CI), the project's own
Python wrapper and its pure-PyTorch ``QuickCumsum`` run on top of the stand-in too.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from detectors.bev_pool import bev_pool_backward, bev_pool_forward  # noqa: E402


def _random_points(rng, n, b, d, h, w, c):
    """(N, C) float32 features and (N, 4) int32 coords (h, w, d, batch), with many shared voxels."""
    coords = np.column_stack(
        [rng.integers(0, h, n), rng.integers(0, w, n), rng.integers(0, d, n), rng.integers(0, b, n)]
    ).astype(np.int32)
    feats = rng.normal(0.0, 1.0, (n, c)).astype(np.float32)
    return feats, coords


def _intervals(coords, b, d, h, w):
    """Sort order, interval starts and lengths of equal-voxel runs (what the wrapper computes)."""
    ranks = ((coords[:, 3] * d + coords[:, 2]) * h + coords[:, 0]) * w + coords[:, 1]
    order = np.argsort(ranks, kind="stable")
    sorted_ranks = ranks[order]
    starts = np.flatnonzero(np.r_[True, sorted_ranks[1:] != sorted_ranks[:-1]])
    lengths = np.diff(np.r_[starts, len(ranks)])
    return order, starts.astype(np.int32), lengths.astype(np.int32)


def _pool(feats, coords, b, d, h, w):
    order, starts, lengths = _intervals(coords, b, d, h, w)
    return bev_pool_forward(
        torch.from_numpy(feats[order]),
        torch.from_numpy(coords[order]),
        torch.from_numpy(lengths),
        torch.from_numpy(starts),
        b, d, h, w,
    )  # fmt: skip


def test_hand_computed_grid():
    # One batch, one z bin, a 2 x 3 (x, y) grid, two channels.
    feats = np.array([[1, 10], [2, 20], [4, 40], [8, 80], [16, 160]], dtype=np.float32)
    coords = np.array(
        [[0, 1, 0, 0], [1, 2, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [1, 2, 0, 0]], dtype=np.int32
    )
    out = _pool(feats, coords, 1, 1, 2, 3).numpy()
    assert out.shape == (1, 1, 2, 3, 2)
    expected = np.zeros((2, 3, 2), dtype=np.float32)
    expected[0, 1] = [5, 50]  # points 0 and 2
    expected[1, 2] = [18, 180]  # points 1 and 4
    expected[1, 0] = [8, 80]
    np.testing.assert_array_equal(out[0, 0], expected)


def test_batch_and_depth_axes_are_kept_apart():
    # The same (h, w) in two z bins and two batches: four separate voxels.
    feats = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]], dtype=np.float32)
    coords = np.array(
        [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=np.int32
    )
    out = _pool(feats, coords, 2, 2, 2, 2).numpy()
    assert out[0, 0, 1, 1, 0] == 1 and out[0, 1, 1, 1, 0] == 2
    assert out[1, 0, 1, 1, 0] == 3 and out[1, 1, 1, 1, 0] == 9
    assert np.count_nonzero(out) == 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_inputs_match_np_add_at(seed):
    rng = np.random.default_rng(seed)
    b, d, h, w, c = 2, 3, 17, 11, 5
    feats, coords = _random_points(rng, 4000, b, d, h, w, c)
    out = _pool(feats, coords, b, d, h, w).numpy()
    expected = np.zeros((b, d, h, w, c), dtype=np.float64)
    np.add.at(expected, (coords[:, 3], coords[:, 2], coords[:, 0], coords[:, 1]), feats)
    np.testing.assert_allclose(out, expected, rtol=0, atol=2e-5)
    # Untouched voxels are exactly zero.
    touched = np.zeros((b, d, h, w), dtype=bool)
    touched[coords[:, 3], coords[:, 2], coords[:, 0], coords[:, 1]] = True
    assert not out[~touched].any()


def test_sums_accumulate_in_interval_order_like_the_kernel():
    """The kernel adds an interval's rows to a float32 zero one after another; so does the
    stand-in, to the bit."""
    rng = np.random.default_rng(7)
    b, d, h, w, c = 1, 2, 6, 5, 3
    feats, coords = _random_points(rng, 600, b, d, h, w, c)
    feats *= np.float32(1e3) ** rng.integers(-1, 2, (600, 1)).astype(np.float32)
    out = _pool(feats, coords, b, d, h, w).numpy()
    order, starts, lengths = _intervals(coords, b, d, h, w)
    sorted_feats, sorted_coords = feats[order], coords[order]
    for start, length in zip(starts, lengths, strict=True):
        psum = np.zeros(c, dtype=np.float32)
        for i in range(start, start + length):
            psum = psum + sorted_feats[i]
        hi, wi, di, bi = sorted_coords[start]
        np.testing.assert_array_equal(out[bi, di, hi, wi], psum)


def test_backward_gives_each_point_its_voxel_gradient():
    rng = np.random.default_rng(3)
    b, d, h, w, c = 2, 2, 7, 9, 4
    feats, coords = _random_points(rng, 500, b, d, h, w, c)
    order, starts, lengths = _intervals(coords, b, d, h, w)
    out_grad = rng.normal(size=(b, d, h, w, c)).astype(np.float32)
    sorted_coords = coords[order]
    x_grad = bev_pool_backward(
        torch.from_numpy(out_grad),
        torch.from_numpy(sorted_coords),
        torch.from_numpy(lengths),
        torch.from_numpy(starts),
        b, d, h, w,
    ).numpy()  # fmt: skip
    expected = out_grad[
        sorted_coords[:, 3], sorted_coords[:, 2], sorted_coords[:, 0], sorted_coords[:, 1]
    ]
    np.testing.assert_array_equal(x_grad, expected)


def test_partial_intervals_leave_uncovered_rows_alone():
    # The kernel only reads (and, backward, writes) rows inside an interval.
    feats = np.array([[1.0], [2.0], [4.0], [8.0]], dtype=np.float32)
    coords = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 0, 0]], dtype=np.int32)
    starts, lengths = (
        torch.tensor([0, 2], dtype=torch.int32),
        torch.tensor([1, 1], dtype=torch.int32),
    )
    args = (torch.from_numpy(coords), lengths, starts, 1, 1, 1, 2)
    out = bev_pool_forward(torch.from_numpy(feats), *args).numpy()
    np.testing.assert_array_equal(out.reshape(-1), [1.0, 4.0])
    grad = bev_pool_backward(torch.tensor([[[[[5.0], [7.0]]]]]), *args).numpy()
    np.testing.assert_array_equal(grad.reshape(-1), [5.0, 0.0, 7.0, 0.0])


def test_empty_input_gives_a_zero_grid():
    out = bev_pool_forward(
        torch.zeros((0, 3)),
        torch.zeros((0, 4), dtype=torch.int32),
        torch.zeros(0, dtype=torch.int32),
        torch.zeros(0, dtype=torch.int32),
        1, 2, 3, 4,
    )  # fmt: skip
    assert out.shape == (1, 2, 3, 4, 3) and not out.any()


def test_bad_coordinates_and_intervals_are_refused():
    feats = torch.ones((2, 1))
    lengths, starts = torch.tensor([1, 1]), torch.tensor([0, 1])
    outside = torch.tensor([[0, 0, 0, 0], [0, 3, 0, 0]], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"\[0, 3, 0, 0\] lies outside the grid"):
        bev_pool_forward(feats, outside, lengths, starts, 1, 1, 2, 3)
    inside = torch.zeros((2, 4), dtype=torch.int32)
    with pytest.raises(ValueError, match="outside the 2 pooled points"):
        bev_pool_forward(feats, inside, torch.tensor([1, 2]), starts, 1, 1, 2, 3)
    with pytest.raises(ValueError, match="one row per geom_feats row"):
        bev_pool_forward(torch.ones((3, 1)), inside, lengths, starts, 1, 1, 2, 3)


# --- the project's own wrapper on top of the stand-in (needs an mmdetection3d checkout) ---------


def _project_bev_pool_module():
    root = os.environ.get("MMDET3D_ROOT")
    path = Path(root or "") / "projects/BEVFusion/bevfusion/ops/bev_pool/bev_pool.py"
    if not root or not path.is_file():
        pytest.skip(
            "set MMDET3D_ROOT to an mmdetection3d v1.4.0 checkout to run the project's wrapper"
        )
    import detectors.bev_pool as stand_in

    package = types.ModuleType("_bevfusion_bev_pool")
    package.__path__ = [str(path.parent)]
    package.bev_pool_ext = stand_in
    sys.modules["_bevfusion_bev_pool"] = package
    sys.modules["_bevfusion_bev_pool.bev_pool_ext"] = stand_in
    spec = importlib.util.spec_from_file_location("_bevfusion_bev_pool.bev_pool", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_project_wrapper_on_the_stand_in_matches_np_add_at_and_quick_cumsum():
    project = _project_bev_pool_module()
    rng = np.random.default_rng(11)
    b, d, h, w, c = 2, 1, 36, 36, 8
    feats, coords = _random_points(rng, 20000, b, d, h, w, c)
    x = torch.from_numpy(feats).requires_grad_(True)
    out = project.bev_pool(x, torch.from_numpy(coords).long(), b, d, h, w)
    assert tuple(out.shape) == (b, c, d, h, w)
    expected = np.zeros((b, d, h, w, c), dtype=np.float64)
    np.add.at(expected, (coords[:, 3], coords[:, 2], coords[:, 0], coords[:, 1]), feats)
    np.testing.assert_allclose(out.detach().numpy(), expected.transpose(0, 4, 1, 2, 3), atol=2e-5)

    # The project's pure-PyTorch reference (LSS's cumsum trick) on the same sorted points.
    ranks = torch.from_numpy(
        (((coords[:, 3] * d + coords[:, 2]) * h + coords[:, 0]) * w + coords[:, 1]).astype(np.int64)
    )
    order = ranks.argsort()
    sums, cells = project.QuickCumsum.apply(
        torch.from_numpy(feats)[order], torch.from_numpy(coords)[order].long(), ranks[order]
    )
    reference = torch.zeros((b, d, h, w, c))
    reference[cells[:, 3], cells[:, 2], cells[:, 0], cells[:, 1]] = sums
    np.testing.assert_allclose(
        out.detach().numpy(), reference.permute(0, 4, 1, 2, 3).numpy(), atol=1e-3
    )

    # Backward through the project's autograd function.
    g = torch.from_numpy(rng.normal(size=(b, c, d, h, w)).astype(np.float32))
    (out * g).sum().backward()
    g_np = g.numpy().transpose(0, 2, 3, 4, 1)
    np.testing.assert_array_equal(
        x.grad.numpy(), g_np[coords[:, 3], coords[:, 2], coords[:, 0], coords[:, 1]]
    )
