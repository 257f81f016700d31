"""BEV pooling in plain PyTorch: the stand-in for BEVFusion's CUDA-only ``bev_pool_ext``.

BEVFusion's camera branch lifts every image-feature pixel to ``D`` depth bins, places each of
these frustum points in a BEV voxel, and sums the features of all points that share a voxel. The
mmdetection3d project (``projects/BEVFusion/bevfusion/ops/bev_pool``) does this in two layers:

- its Python wrapper ``bev_pool(feats, coords, B, D, H, W)`` sorts the points by voxel rank, cuts
  the sorted list into intervals of equal rank (``interval_starts``, ``interval_lengths``) and
  calls the compiled extension, then permutes the result to ``(B, C, D, H, W)``;
- the extension's ``bev_pool_forward`` sums each interval's rows of ``x`` (sequentially, from 0)
  and writes the sum at the voxel of the interval's first point, in a zero-filled
  ``(B, D, H, W, C)`` grid; ``bev_pool_backward`` hands every point its voxel's gradient.

``coords`` rows are ``(h, w, d, b)``: the H index (BEVFusion's x bin), the W index (y bin), the D
index (z bin) and the batch index. This module implements the extension's two functions with the
same signatures and results, so the project's own wrapper (sorting, intervals, autograd) runs
unchanged on CPU; the backend installs it as ``bev_pool_ext`` only where that extension was not
compiled. Unlike the kernel (which writes out of bounds), coordinates outside the grid and
intervals outside ``x`` raise ``ValueError``.

torch is imported lazily so that importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any


def _interval_rows(interval_lengths: Any, interval_starts: Any, n: int) -> tuple[Any, Any]:
    """(row, interval) of every point covered by an interval: ``row`` indexes ``x``, in interval
    order and, inside one, in order; ``interval`` the interval it belongs to."""
    import torch

    lengths = interval_lengths.long()
    starts = interval_starts.long()
    if lengths.shape != starts.shape or lengths.dim() != 1:
        raise ValueError(
            f"interval_lengths {tuple(lengths.shape)} and interval_starts {tuple(starts.shape)} "
            "must be equal-length vectors"
        )
    if len(lengths) and (
        bool((lengths < 0).any()) or bool((starts < 0).any()) or int((starts + lengths).max()) > n
    ):
        raise ValueError(f"an interval reaches outside the {n} pooled points")
    interval = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)
    first_of_own = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    row = torch.arange(len(interval), device=lengths.device) - first_of_own + starts[interval]
    return row, interval


def _interval_cells(geom_feats: Any, interval_starts: Any, b: int, d: int, h: int, w: int) -> Any:
    """Flat index into a ``(b, d, h, w)`` grid of each interval's voxel (its first point's)."""
    coords = geom_feats[interval_starts.long()].long()
    if coords.dim() != 2 or coords.shape[1] != 4:
        raise ValueError(
            f"geom_feats must be (N, 4) rows (h, w, d, batch), got {tuple(coords.shape)}"
        )
    upper = coords.new_tensor([h, w, d, b])
    outside = (coords < 0) | (coords >= upper)
    if bool(outside.any()):
        bad = coords[outside.any(dim=1)][0].tolist()
        raise ValueError(
            f"voxel (h, w, d, batch) = {bad} lies outside the grid (h, w, d, batch) < {[h, w, d, b]}"
        )
    hi, wi, di, bi = coords.unbind(dim=1)
    return ((bi * d + di) * h + hi) * w + wi


def bev_pool_forward(
    x: Any,
    geom_feats: Any,
    interval_lengths: Any,
    interval_starts: Any,
    b: int,
    d: int,
    h: int,
    w: int,
) -> Any:
    """Sum each interval of points into its voxel: a zero-filled ``(b, d, h, w, C)`` tensor.

    Args:
        x: (N, C) features of the points, sorted so that each interval's points are contiguous.
        geom_feats: (N, 4) integer voxel coordinates ``(h, w, d, batch)`` of the points.
        interval_lengths, interval_starts: (I,) integer; interval ``i`` is rows
            ``interval_starts[i]`` to ``interval_starts[i] + interval_lengths[i] - 1`` of ``x``,
            all in the voxel of its first row.
        b, d, h, w: the grid's batch size, depth (z bins), height (x bins) and width (y bins).

    Returns:
        (b, d, h, w, C) tensor, ``x``'s dtype and device; voxels no interval reaches are 0. Each
        voxel's sum is accumulated in interval order, as the CUDA kernel does.
    """
    import torch

    b, d, h, w = int(b), int(d), int(h), int(w)
    if x.dim() != 2 or x.shape[0] != geom_feats.shape[0]:
        raise ValueError(
            f"x must be (N, C) with one row per geom_feats row, got {tuple(x.shape)} and "
            f"{tuple(geom_feats.shape)}"
        )
    row, interval = _interval_rows(interval_lengths, interval_starts, x.shape[0])
    sums = torch.zeros((len(interval_lengths), x.shape[1]), dtype=x.dtype, device=x.device)
    sums.index_add_(0, interval, x[row])
    out = torch.zeros((b * d * h * w, x.shape[1]), dtype=x.dtype, device=x.device)
    out[_interval_cells(geom_feats, interval_starts, b, d, h, w)] = sums
    return out.view(b, d, h, w, x.shape[1])


def bev_pool_backward(
    out_grad: Any,
    geom_feats: Any,
    interval_lengths: Any,
    interval_starts: Any,
    b: int,
    d: int,
    h: int,
    w: int,
) -> Any:
    """Gradient of ``bev_pool_forward`` with respect to ``x``: (N, C), each point covered by an
    interval gets its voxel's gradient, every other row 0.

    Args:
        out_grad: (b, d, h, w, C) gradient of the pooled grid.
        geom_feats, interval_lengths, interval_starts, b, d, h, w: as in ``bev_pool_forward``.
    """
    import torch

    b, d, h, w = int(b), int(d), int(h), int(w)
    if tuple(out_grad.shape[:4]) != (b, d, h, w) or out_grad.dim() != 5:
        raise ValueError(f"out_grad must be ({b}, {d}, {h}, {w}, C), got {tuple(out_grad.shape)}")
    n, c = geom_feats.shape[0], out_grad.shape[4]
    row, interval = _interval_rows(interval_lengths, interval_starts, n)
    cells = _interval_cells(geom_feats, interval_starts, b, d, h, w)
    x_grad = torch.zeros((n, c), dtype=out_grad.dtype, device=out_grad.device)
    x_grad[row] = out_grad.reshape(-1, c)[cells[interval]]
    return x_grad
