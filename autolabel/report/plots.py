"""Plots of the run report, as PNG bytes (matplotlib, Agg backend; deterministic metadata).

- :func:`bev_png`: bird's-eye view of one keyframe in its ego frame: the run's boxes (region ids
  where the keyframe has them), their tracks over the QA window, and the ground-truth boxes.
- :func:`bar_png`, :func:`grouped_bar_png`, :func:`lines_png`: the metric plots.
- :func:`precision_yield_png`: QA agreement against yield over confidence thresholds.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    plt = _pyplot()
    buf = io.BytesIO()
    # No software/date metadata: equal figures give equal bytes.
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def box_footprints(
    x_m: np.ndarray, y_m: np.ndarray, yaw_rad: np.ndarray, width_m: np.ndarray, length_m: np.ndarray
) -> np.ndarray:
    """(N, 5, 2) closed ground-plane outlines of boxes (front-left, front-right, rear-right,
    rear-left, front-left), in the frame of the inputs."""
    half_l, half_w = 0.5 * np.asarray(length_m), 0.5 * np.asarray(width_m)
    local = np.stack(
        [
            np.stack([half_l, half_w], -1),
            np.stack([half_l, -half_w], -1),
            np.stack([-half_l, -half_w], -1),
            np.stack([-half_l, half_w], -1),
            np.stack([half_l, half_w], -1),
        ],
        axis=1,
    )
    c, s = np.cos(yaw_rad)[:, None], np.sin(yaw_rad)[:, None]
    x = c * local[..., 0] - s * local[..., 1] + np.asarray(x_m)[:, None]
    y = s * local[..., 0] + c * local[..., 1] + np.asarray(y_m)[:, None]
    return np.stack([x, y], axis=-1)


def bev_png(
    boxes_ego: Mapping[str, np.ndarray],
    labels: Sequence[str],
    highlight: np.ndarray,
    trails_ego: Sequence[np.ndarray] = (),
    gt_boxes_ego: Mapping[str, np.ndarray] | None = None,
    ego_length_m: float = 4.084,
    ego_width_m: float = 1.73,
    ego_center_x_m: float = 1.3,
    extent_m: float = 50.0,
    title: str = "",
) -> bytes:
    """A bird's-eye plot in the keyframe's ego frame, x (forward) up, y (left) to the left.

    Args:
        boxes_ego: the run's boxes: ``x_m``, ``y_m``, ``yaw_rad``, ``width_m``, ``length_m`` (N,).
        labels: N labels drawn at the boxes ("R3" for a region, "t17" for another track).
        highlight: (N,) bool, boxes that are Set-of-Mark regions (drawn in colour).
        trails_ego: per box an (K, 2) polyline of its track's centres over the window (may be
            empty).
        gt_boxes_ego: ground-truth boxes (same keys), drawn dashed.
        ego_length_m, ego_width_m, ego_center_x_m: the ego's box.
        extent_m: half-width of the plotted square, metres.
        title: plot title.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 5.2))
    # Plot coordinates: horizontal = -y (right is positive), vertical = x (forward is up).
    if gt_boxes_ego is not None and len(gt_boxes_ego["x_m"]):
        outline = box_footprints(
            **{k: gt_boxes_ego[k] for k in ("x_m", "y_m", "yaw_rad", "width_m", "length_m")}
        )
        for o in outline:
            ax.plot(-o[:, 1], o[:, 0], color="0.35", lw=1.0, ls="--")
    for trail in trails_ego:
        if len(trail) > 1:
            ax.plot(-trail[:, 1], trail[:, 0], color="tab:blue", lw=0.8, alpha=0.6)
    n = len(boxes_ego["x_m"])
    if n:
        outline = box_footprints(
            **{k: boxes_ego[k] for k in ("x_m", "y_m", "yaw_rad", "width_m", "length_m")}
        )
        for i in range(n):
            colour = "tab:red" if highlight[i] else "tab:gray"
            ax.plot(-outline[i, :, 1], outline[i, :, 0], color=colour, lw=1.4)
            # Heading tick: box centre to the middle of its front edge.
            front = 0.5 * (outline[i, 0] + outline[i, 1])
            ax.plot(
                [-boxes_ego["y_m"][i], -front[1]],
                [boxes_ego["x_m"][i], front[0]],
                color=colour,
                lw=1.0,
            )
            if abs(boxes_ego["x_m"][i]) < extent_m and abs(boxes_ego["y_m"][i]) < extent_m:
                ax.text(
                    -boxes_ego["y_m"][i],
                    boxes_ego["x_m"][i] + 1.2,
                    labels[i],
                    fontsize=7,
                    ha="center",
                    color=colour,
                )
    ego = box_footprints(
        np.array([ego_center_x_m]),
        np.zeros(1),
        np.zeros(1),
        np.array([ego_width_m]),
        np.array([ego_length_m]),
    )[0]
    ax.fill(-ego[:, 1], ego[:, 0], color="black")
    ax.set_xlim(-extent_m, extent_m)
    ax.set_ylim(-extent_m, extent_m)
    ax.set_aspect("equal")
    ax.set_xlabel("right of ego [m]  (-y)")
    ax.set_ylabel("ahead of ego [m]  (x)")
    ax.grid(True, lw=0.3)
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color="tab:red", lw=1.4, label="region (SoM)"),
        Line2D([], [], color="tab:gray", lw=1.4, label="other track"),
        Line2D([], [], color="tab:blue", lw=0.8, label="track, t-2..t+3 s"),
    ]
    if gt_boxes_ego is not None:
        handles.append(Line2D([], [], color="0.35", lw=1.0, ls="--", label="ground truth"))
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return _png(fig)


def bar_png(
    labels: Sequence[str],
    values: Sequence[float],
    title: str,
    ylabel: str,
    colours: Sequence[str] | None = None,
    horizontal: bool = False,
) -> bytes:
    """A bar chart; NaN values are drawn as empty bars."""
    plt = _pyplot()
    n = len(labels)
    if horizontal:
        fig, ax = plt.subplots(figsize=(7.0, max(2.0, 0.28 * n + 1.0)))
        ax.barh(range(n), np.nan_to_num(values), color=colours)
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(ylabel)
    else:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * n + 1.5), 3.6))
        ax.bar(range(n), np.nan_to_num(values), color=colours)
        ax.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x" if horizontal else "y", lw=0.3)
    fig.tight_layout()
    return _png(fig)


def grouped_bar_png(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    title: str,
    ylabel: str,
) -> bytes:
    """Bars of several series per group (e.g. agreement per question type for two runs)."""
    plt = _pyplot()
    n, k = len(groups), max(1, len(series))
    width = 0.8 / k
    fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * n + 1.5), 3.8))
    for j, (name, values) in enumerate(series.items()):
        ax.bar(np.arange(n) + (j - (k - 1) / 2) * width, np.nan_to_num(values), width, label=name)
    ax.set_xticks(range(n), groups, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", lw=0.3)
    fig.tight_layout()
    return _png(fig)


def lines_png(
    x: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    title: str,
    xlabel: str,
    ylabel: str,
) -> bytes:
    """One line per series over ``x`` (e.g. LSR@t per answer file)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for name, values in series.items():
        y = np.array([np.nan if v is None else v for v in values], dtype=float)
        ax.plot(x, y, marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, lw=0.3)
    fig.tight_layout()
    return _png(fig)


def precision_yield_png(curve: Mapping[str, Any], title: str) -> bytes:
    """Agreement against yield over confidence thresholds (``label_quality.json``'s ``curve``):
    left, agreement over yield per category and overall, the default threshold starred; right,
    overall agreement and yield over the threshold, the default as a dashed line."""
    plt = _pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.0, 3.8))
    d = float(curve["default_threshold"])
    groups = {"all": curve["overall"], **curve["by_category"]}
    for name, c in groups.items():
        x = np.array([np.nan if v is None else v for v in c["yield"]], dtype=float)
        y = np.array([np.nan if v is None else v for v in c["agreement"]], dtype=float)
        style = {"lw": 2.2, "color": "black"} if name == "all" else {"lw": 1.0}
        (line,) = ax.plot(x, y, marker=".", label=name, **style)
        i = int(np.argmin(np.abs(np.asarray(c["thresholds"]) - d)))
        ax.plot(x[i], y[i], marker="*", ms=11, color=line.get_color())
    ax.set_xlabel("yield (agreeing / ground-truth questions)")
    ax.set_ylabel("agreement with ground truth")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, lw=0.3)
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(f"{title} (* min_confidence {d:g})", fontsize=9)
    o = curve["overall"]
    t = np.asarray(o["thresholds"], dtype=float)
    for key in ("agreement", "yield"):
        bx.plot(t, [np.nan if v is None else v for v in o[key]], marker=".", label=key)
    bx.axvline(d, ls="--", color="grey", lw=1.0, label="default")
    bx.set_xlabel("min_confidence")
    bx.set_ylim(-0.02, 1.02)
    bx.grid(True, lw=0.3)
    bx.legend(fontsize=7)
    bx.set_title("overall", fontsize=9)
    fig.tight_layout()
    return _png(fig)
