"""Measuring a release's anonymization on hand-labelled images.

Labels are a small JSON of pixel boxes (``plates``, ``faces``, ``heads``: lists of
``{"keyframe", "camera", "box": [u0, v0, u1, v1]}``) and the keyframes that were checked
(``checked_keyframes``, every camera). :func:`measure_anonymization` anonymizes those images as
the release does and returns the figures the release report prints: recall (a labelled box is
covered when at least ``covered_fraction`` of it is blurred), the blurred share of the image, the
share of each car's projected silhouette left sharp, and seconds per image.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from autolabel.anonymize import AnonymizeConfig, anonymize_image, clip_plate_anchors
from autolabel.anonymize.coverage import box_blurred_fraction, vehicle_sharp_fraction
from autolabel.anonymize.geometric import boxes_at_time, clip_geometric_config
from autolabel.boxes import Boxes3D
from autolabel.clip import Clip


@dataclass
class AnonymizationFigures:
    """Figures of one anonymizer on labelled images.

    Attributes:
        images: camera images measured.
        plate_recall, face_recall, head_recall: share of labelled boxes covered (NaN: none).
        plates, faces, heads: labelled boxes.
        blurred_fraction: blurred pixels / all pixels.
        car_sharp_median, car_sharp_p10: median and 10th percentile over (car, image) pairs of
            the share of the car's silhouette left sharp.
        cars: (car, image) pairs measured.
        visible_sharp_median, visible_sharp_p10, visible_cars: the same over the part of each
            car's silhouette where it is the nearest box (what occlusion leaves of it).
        seconds_per_image: anonymization time (reading the image not included).
        missed: the labelled boxes not covered (keyframe, camera, kind, box, blurred share).
    """

    images: int
    plate_recall: float
    face_recall: float
    head_recall: float
    plates: int
    faces: int
    heads: int
    blurred_fraction: float
    car_sharp_median: float
    car_sharp_p10: float
    cars: int
    visible_sharp_median: float
    visible_sharp_p10: float
    visible_cars: int
    seconds_per_image: float
    missed: list

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def load_labels(path: str | Path) -> dict[str, Any]:
    """The label JSON, checked: errors name the file and the entry."""
    p = Path(path)
    try:
        labels = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: cannot read labels: {e}") from None
    if not isinstance(labels.get("checked_keyframes"), list):
        raise ValueError(f"{p}: checked_keyframes: expected a list of keyframe indices")
    for kind in ("plates", "faces", "heads"):
        for i, entry in enumerate(labels.get(kind, [])):
            box = entry.get("box")
            if not (
                isinstance(box, list) and len(box) == 4 and box[2] > box[0] and box[3] > box[1]
            ):
                raise ValueError(f"{p}: {kind}[{i}].box: expected [u0, v0, u1, v1], got {box!r}")
            if entry.get("keyframe") not in labels["checked_keyframes"]:
                raise ValueError(f"{p}: {kind}[{i}]: keyframe {entry.get('keyframe')} not checked")
    return labels


def measure_anonymization(
    clip: Clip,
    boxes: list[Boxes3D],
    margins: list[np.ndarray],
    labels: dict[str, Any],
    config: AnonymizeConfig,
    face_detector=None,
    covered_fraction: float = 0.9,
    keyframes: list[int] | None = None,
) -> AnonymizationFigures:
    """Anonymize the checked keyframes' images and measure them against the labels.

    Args:
        clip: the clip the labels belong to.
        boxes, margins: per keyframe, the anonymizer's boxes (global) and extra margins, as
            ``autolabel.release.writer.anonymization_boxes`` returns them.
        labels: :func:`load_labels`' result.
        config: the anonymizer.
        face_detector: CenterFace when ``config.learned_faces``.
        covered_fraction: a labelled box is covered when this share of it is blurred.
        keyframes: keyframes to measure (default: the labels' checked ones); recall counts the
            labels of these only.
    """
    frames = labels["checked_keyframes"] if keyframes is None else keyframes
    # As a release does (the period needs the clip read with max_sweeps >= 2).
    config = replace(config, geometric=clip_geometric_config(clip, config.geometric))
    masks = {}
    start = time.perf_counter()
    lidar = clip_plate_anchors(clip.frames, boxes, margins, config.geometric, config.lidar_plates)
    # Every keyframe's sweep is read for the anchors its tracks lend: their share per measured one.
    seconds = (time.perf_counter() - start) * len(frames) / max(len(clip.frames), 1)
    for f in frames:
        frame = clip.frames[f]
        anchors = lidar.anchors[f]
        for channel, cam in sorted(frame.cameras.items()):
            image = cv2.imread(str(cam.path), cv2.IMREAD_COLOR)
            if image is None:
                raise FileNotFoundError(f"{cam.path}: missing or not an image")
            start = time.perf_counter()
            anon = anonymize_image(
                image, cam, boxes[f], frame.timestamp_us, config, face_detector, margins[f], anchors
            )
            seconds += time.perf_counter() - start
            masks[f, channel] = anon.mask
    return figures_from_masks(clip, masks, labels, seconds, covered_fraction)


def figures_from_masks(
    clip: Clip,
    masks: dict[tuple[int, str], np.ndarray],
    labels: dict[str, Any],
    seconds: float = float("nan"),
    covered_fraction: float = 0.9,
) -> AnonymizationFigures:
    """The figures of blur masks of a clip's keyframe images (any anonymizer's).

    Args:
        clip: the clip; its annotations (or none) give the cars whose sharp share is measured.
        masks: (H, W) bool blurred pixels by (keyframe index, camera channel); recall counts
            the labels of these images only.
        labels: :func:`load_labels`' result.
        seconds: time the anonymizer took for all of them.
        covered_fraction: a labelled box is covered when this share of it is blurred.
    """
    kinds = ("plates", "faces", "heads")
    hit = {k: 0 for k in kinds}
    count = {k: 0 for k in kinds}
    missed, sharp, visible = [], [], []
    blurred = pixels = 0
    for (f, channel), mask in sorted(masks.items()):
        frame = clip.frames[f]
        cam = frame.cameras[channel]
        blurred += int(mask.sum())
        pixels += mask.size
        if frame.ground_truth is not None:
            dt_s = (cam.timestamp_us - frame.timestamp_us) * 1e-6
            cars = boxes_at_time(frame.ground_truth.boxes, dt_s)
            sharp.append(vehicle_sharp_fraction(mask, cars, cam))
            visible.append(vehicle_sharp_fraction(mask, cars, cam, visible_only=True))
        for kind in kinds:
            entries = [
                e for e in labels.get(kind, []) if e["keyframe"] == f and e["camera"] == channel
            ]
            if not entries:
                continue
            share = box_blurred_fraction(mask, np.array([e["box"] for e in entries]))
            count[kind] += len(entries)
            hit[kind] += int((share >= covered_fraction).sum())
            for e, s in zip(entries, share, strict=True):
                if s < covered_fraction:
                    missed.append((f, channel, kind, e["box"], round(float(s), 3)))
    sharp_all = np.concatenate(sharp) if sharp else np.zeros(0)
    visible_all = np.concatenate(visible) if visible else np.zeros(0)

    def recall(kind: str) -> float:
        return hit[kind] / count[kind] if count[kind] else float("nan")

    def pct(values: np.ndarray, q: float) -> float:
        return float(np.percentile(values, q)) if len(values) else float("nan")

    return AnonymizationFigures(
        images=len(masks),
        plate_recall=recall("plates"),
        face_recall=recall("faces"),
        head_recall=recall("heads"),
        plates=count["plates"],
        faces=count["faces"],
        heads=count["heads"],
        blurred_fraction=blurred / max(pixels, 1),
        car_sharp_median=pct(sharp_all, 50),
        car_sharp_p10=pct(sharp_all, 10),
        cars=len(sharp_all),
        visible_sharp_median=pct(visible_all, 50),
        visible_sharp_p10=pct(visible_all, 10),
        visible_cars=len(visible_all),
        seconds_per_image=seconds / max(len(masks), 1),
        missed=missed,
    )
