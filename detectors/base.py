"""The one interface every detector backend implements: keyframes in, global-frame boxes out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from autolabel.boxes import Boxes3D
from autolabel.clip import Clip, Frame
from detectors.detection_results import submission_meta


class DetectorUnavailableError(RuntimeError):
    """A backend cannot run here: a package, a model file or a device is missing.

    The message says what to install or which path to pass.
    """


class Detector(ABC):
    """A 3D object detector behind the toolkit's one interface.

    A backend converts its model's output into ``Boxes3D`` at the edge: boxes in the ``global``
    frame, ``label`` an index into ``DETECTION_CLASSES``, ``score`` in [0, 1], ``velocity_mps``
    in the global xy plane (NaN where the model gives none), ``track_id`` -1.
    """

    #: The name the CLI and config select the backend by.
    name: ClassVar[str]
    #: The submission ``meta`` block: which inputs the backend used (set per instance if needed).
    meta: dict[str, bool] = submission_meta(use_lidar=True)
    #: LiDAR sweeps before the keyframe's own that the backend reads per keyframe, where the log
    #: has them (``Frame.sweeps``); a run refuses ``read.max_sweeps`` below this plus one.
    earlier_sweeps: int = 0
    #: The quantile of a track's box sizes that estimates the object's size, which the refine
    #: stage uses unless ``refine_options`` sets ``size_quantile``: a LiDAR detector sees an
    #: object's near faces, so most of its boxes are too small (0.75); a backend whose size
    #: errors are centred on the truth sets the median (0.5).
    size_quantile: float = 0.75

    @abstractmethod
    def detect_frames(self, frames: Sequence[Frame]) -> list[Boxes3D]:
        """Detect objects in keyframes; batches inside where the model allows it.

        Args:
            frames: keyframes (LiDAR sweeps, camera images, calibrations, ego poses).

        Returns:
            One ``Boxes3D`` per frame, in the same order, each in the ``global`` frame.
        """

    def detect_clip(self, clip: Clip) -> list[Boxes3D]:
        """One ``Boxes3D`` (global frame) per keyframe of ``clip``, in keyframe order."""
        boxes_per_frame = self.detect_frames(clip.frames)
        check_detections(self.name, clip.frames, boxes_per_frame)
        return boxes_per_frame


def check_detections(name: str, frames: Sequence[Frame], boxes_per_frame: list[Boxes3D]) -> None:
    """Raise if a backend broke the contract: one global-frame ``Boxes3D`` per frame."""
    if len(boxes_per_frame) != len(frames):
        raise RuntimeError(
            f"detector {name!r} returned {len(boxes_per_frame)} box sets for {len(frames)} frames"
        )
    for frame, boxes in zip(frames, boxes_per_frame, strict=True):
        if not isinstance(boxes, Boxes3D) or boxes.frame != "global":
            raise RuntimeError(
                f"detector {name!r} returned {type(boxes).__name__} in frame "
                f"{getattr(boxes, 'frame', None)!r} for sample {frame.token}; expected global Boxes3D"
            )
