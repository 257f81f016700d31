"""SAM2 segmenter: the ``sam2`` package's image predictor prompted with projected 3D boxes.

One ``segment`` call embeds the image once (``SAM2ImagePredictor.set_image``) and decodes every
object's box in one batched ``predict(box=(N, 4), multimask_output=False)``; the score is SAM2's
own predicted IoU (its IoU head ends in a sigmoid in the released configs, so it lies in [0, 1]).

Weights: the user passes a checkpoint path and the Hydra config name it was trained with (for
example ``sam2.1_hiera_large.pt`` with ``configs/sam2.1/sam2.1_hiera_l.yaml``); nothing is ever
downloaded. Without a checkpoint the backend is unavailable and says what to pass. Tests and
benchmarks build a model with random weights via ``sam2.build_sam.build_sam2(config, None)`` and
hand it to ``Sam2Segmenter.from_model``, which exercises the same predictor code.

torchvision: see ``_torchvision_shim``; where ``torchvision.transforms`` does not import (the CPU
laptop and CI), the three transforms SAM2's predictor imports are supplied by that shim, only for
the duration of the predictor's import.
"""

from __future__ import annotations

import importlib
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.segmentation.core import (
    SegmentationResult,
    SegmenterUnavailable,
    validate_segment_inputs,
)

__all__ = ["Sam2Config", "Sam2Segmenter", "import_sam2_image_predictor"]

#: Install lines for hosts whose torch is the CPU build (see README "SAM2").
SAM2_INSTALL_HINT = (
    'pip install "hydra-core>=1.3.2" "iopath>=0.1.10" && '
    "SAM2_BUILD_CUDA=0 pip install --no-build-isolation --no-deps sam2==1.1.0"
)

_IMPORT_LOCK = threading.Lock()


@dataclass(frozen=True)
class Sam2Config:
    """Settings of the SAM2 backend.

    Attributes:
        checkpoint_path: SAM2 checkpoint (``.pt``) on disk; required (None -> unavailable).
        model_config: Hydra config name inside the ``sam2`` package matching the checkpoint, e.g.
            ``configs/sam2.1/sam2.1_hiera_l.yaml``; required with the checkpoint.
        device: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:K"``.
        cuda_bfloat16: run under ``torch.autocast(bfloat16)`` on CUDA, as SAM2's own examples do.
        mask_threshold: logit threshold of the predictor's binary masks.
        max_hole_area: fill background holes up to this area (low-res pixels); 0 disables.
        max_sprinkle_area: remove foreground specks up to this area (low-res pixels); 0 disables.
    """

    checkpoint_path: str | None = None
    model_config: str | None = None
    device: str = "auto"
    cuda_bfloat16: bool = True
    mask_threshold: float = 0.0
    max_hole_area: float = 0.0
    max_sprinkle_area: float = 0.0

    def __post_init__(self) -> None:
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise ValueError(
                f"Sam2Config.device: expected 'auto', 'cpu', 'cuda' or 'cuda:K', got {self.device!r}"
            )
        for key in ("max_hole_area", "max_sprinkle_area"):
            if getattr(self, key) < 0:
                raise ValueError(f"Sam2Config.{key}: must be >= 0, got {getattr(self, key)}")


def _torchvision_transforms_importable() -> bool:
    try:
        importlib.import_module("torchvision.transforms")
    except Exception:  # torchvision's CUDA wheel raises RuntimeError on CPU torch, not ImportError
        return False
    return True


def import_sam2_image_predictor() -> type:
    """``sam2.sam2_image_predictor.SAM2ImagePredictor``, importing it with the shim if needed.

    Raises:
        SegmenterUnavailable: the ``sam2`` package (or its Hydra dependency) is not installed.
    """
    with _IMPORT_LOCK:
        loaded = sys.modules.get("sam2.sam2_image_predictor")
        if loaded is not None:
            return loaded.SAM2ImagePredictor
        try:
            importlib.import_module("sam2.build_sam")
        except ImportError as error:
            raise SegmenterUnavailable(
                f"segmenter 'sam2': the sam2 package is not importable ({error}); install it "
                f"with: {SAM2_INSTALL_HINT}"
            ) from error
        if _torchvision_transforms_importable():
            return importlib.import_module("sam2.sam2_image_predictor").SAM2ImagePredictor
        from autolabel.segmentation._torchvision_shim import as_torchvision_modules

        # A failed torchvision import can leave some of its submodules behind; park them so the
        # shim is what sam2 sees, and restore them after, so nothing else gets the shim.
        parked = {
            name: sys.modules.pop(name)
            for name in list(sys.modules)
            if name == "torchvision" or name.startswith("torchvision.")
        }
        sys.modules.update(as_torchvision_modules())
        try:
            module = importlib.import_module("sam2.sam2_image_predictor")
        finally:
            for name in ("torchvision", "torchvision.transforms"):
                sys.modules.pop(name, None)
            sys.modules.update(parked)
        return module.SAM2ImagePredictor


def _resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SegmenterUnavailable(f"segmenter 'sam2': device {device!r} asked for, but no CUDA")
    return device


class Sam2Segmenter:
    """SAM2 image predictor behind the ``Segmenter`` interface (build once, call per image)."""

    name = "sam2"

    def __init__(self, config: Sam2Config) -> None:
        if config.checkpoint_path is None or config.model_config is None:
            raise SegmenterUnavailable(
                "segmenter 'sam2' is unavailable without weights: pass checkpoint_path (a SAM2 "
                "checkpoint .pt on disk, e.g. sam2.1_hiera_large.pt) and model_config (its Hydra "
                "config name in the sam2 package, e.g. configs/sam2.1/sam2.1_hiera_l.yaml); "
                "nothing is downloaded. Use --segmenter geometric to run without weights."
            )
        checkpoint = Path(config.checkpoint_path)
        if not checkpoint.is_file():
            raise SegmenterUnavailable(
                f"segmenter 'sam2': checkpoint_path {str(checkpoint)!r} is not a file"
            )
        predictor_type = import_sam2_image_predictor()
        from sam2.build_sam import build_sam2

        device = _resolve_device(config.device)
        try:
            model = build_sam2(config.model_config, str(checkpoint), device=device)
        except Exception as error:
            raise SegmenterUnavailable(
                f"segmenter 'sam2': could not build model_config {config.model_config!r} with "
                f"checkpoint {str(checkpoint)!r}: {error}"
            ) from error
        self._init_from_model(model, config, predictor_type)

    @classmethod
    def from_model(cls, model: Any, config: Sam2Config | None = None) -> Sam2Segmenter:
        """Wrap an already built ``SAM2Base`` model (e.g. random weights in tests)."""
        self = cls.__new__(cls)
        self._init_from_model(model, config or Sam2Config(), import_sam2_image_predictor())
        return self

    def _init_from_model(self, model: Any, config: Sam2Config, predictor_type: type) -> None:
        self.config = config
        self.model = model.eval()
        self.predictor = predictor_type(
            model,
            mask_threshold=config.mask_threshold,
            max_hole_area=config.max_hole_area,
            max_sprinkle_area=config.max_sprinkle_area,
        )

    @property
    def device(self) -> str:
        return str(self.predictor.device)

    def segment(
        self,
        image: np.ndarray,
        boxes_2d: np.ndarray,
        prompts: dict[str, Any] | None = None,
    ) -> SegmentationResult:
        """Masks and predicted IoUs of the N boxed objects of one image (one batched decode).

        Args:
            image: (H, W, 3) uint8 RGB.
            boxes_2d: (N, 4) [u_min, v_min, u_max, v_max] pixels; clipped to the image.
            prompts: accepted for interface parity; SAM2 is prompted with the boxes only.

        Returns:
            SegmentationResult: (N, H, W) bool masks, (N,) float32 predicted IoU in [0, 1].
        """
        import torch

        image, boxes, _ = validate_segment_inputs(image, boxes_2d, prompts)
        height_px, width_px = image.shape[:2]
        n = len(boxes)
        if n == 0:
            return SegmentationResult(
                np.zeros((0, height_px, width_px), dtype=bool), np.zeros(0, dtype=np.float32)
            )
        boxes = boxes.copy()
        boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0.0, width_px)
        boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0.0, height_px)
        use_autocast = self.device.startswith("cuda") and self.config.cuda_bfloat16
        autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if use_autocast
            else torch.autocast("cpu", enabled=False)
        )
        with torch.inference_mode(), autocast:
            self.predictor.set_image(image)
            # The predictor keeps this image's embedding until the next set_image, so callers
            # may prompt it again (e.g. with points) without re-encoding.
            masks, iou_predictions, _ = self.predictor.predict(
                box=boxes.astype(np.float32), multimask_output=False
            )
        # The predictor squeezes its batch axis: (1, H, W) / (1,) for one box, (N, 1, H, W) /
        # (N, 1) for several; bring both to (N, H, W) / (N,).
        masks = np.asarray(masks).reshape(n, height_px, width_px) > 0.5
        score = np.asarray(iou_predictions, dtype=np.float32).reshape(n)
        score = np.nan_to_num(score, nan=0.0).clip(0.0, 1.0).astype(np.float32)
        return SegmentationResult(np.ascontiguousarray(masks), score)
