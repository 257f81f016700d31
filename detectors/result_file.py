"""``results`` backend: detections from a nuScenes detection submission JSON of any model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autolabel.boxes import Boxes3D
from autolabel.clip import Frame
from detectors.base import Detector, DetectorUnavailableError
from detectors.detection_results import (
    META_KEYS,
    SubmissionFormatError,
    load_detection_submission,
    submission_meta,
)


@dataclass
class ResultFileConfig:
    """Options of the ``results`` backend.

    Attributes:
        path: the submission JSON (``{"meta": ..., "results": {sample_token: [box, ...]}}``), as
            written by mmdet3d, BEVFusion's own repository and most nuScenes detectors.
        score_threshold: drop boxes scoring below this.
        missing_sample: what to do for a keyframe whose token is not in the file: ``error``
            (default: the file is probably for another dataset or split) or ``empty`` (no boxes).
    """

    path: str | None = None
    score_threshold: float = 0.0
    missing_sample: str = "error"

    def __post_init__(self) -> None:
        if self.missing_sample not in ("error", "empty"):
            raise ValueError(
                f"missing_sample: expected 'error' or 'empty', got {self.missing_sample!r}"
            )


class ResultFileUnusable(DetectorUnavailableError, SubmissionFormatError):
    """The result file is malformed or out of range: the ``results`` backend cannot run (so the
    run stops before its first clip, with one line naming the file, sample and entry)."""


class ResultFileDetector(Detector):
    """Replays the boxes a submission file holds for each keyframe's sample token."""

    name = "results"

    def __init__(self, config: ResultFileConfig | None = None) -> None:
        self.config = config or ResultFileConfig()
        if not self.config.path:
            raise DetectorUnavailableError(
                "detector 'results' needs a nuScenes detection result file: pass "
                "detector_options.path (CLI: --detector-option path=FILE.json)"
            )
        self.path = Path(self.config.path)
        try:
            self.boxes_by_sample, meta = load_detection_submission(self.path)
        except SubmissionFormatError as e:  # the run cannot start: say why, naming the entry
            raise ResultFileUnusable(f"detector 'results': {e}") from None
        self.meta = submission_meta(**{k: bool(v) for k, v in meta.items() if k in META_KEYS})

    def detect_frames(self, frames: Sequence[Frame]) -> list[Boxes3D]:
        out = []
        for frame in frames:
            boxes = self.boxes_by_sample.get(frame.token)
            if boxes is None:
                if self.config.missing_sample == "error":
                    raise KeyError(
                        f"{self.path}: no results for sample {frame.token!r} (keyframe "
                        f"{frame.index}); set missing_sample='empty' to treat it as no detections"
                    )
                boxes = Boxes3D.empty("global")
            out.append(boxes[boxes.score >= self.config.score_threshold])
        return out
