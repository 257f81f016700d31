"""The three torchvision transforms SAM2's image predictor needs, for hosts without torchvision.

Why this exists: ``sam2.sam2_image_predictor`` imports ``sam2.utils.transforms``, whose only
torchvision use is ``from torchvision.transforms import Normalize, Resize, ToTensor`` (checked in
sam2 1.1.0, which is facebookresearch/sam2 at commit 2b90b9f; the rest of the image path,
``build_sam2`` and the model, needs no torchvision). torchvision's PyPI wheels for Linux are built
against CUDA torch and fail to import with the CPU torch the laptop and CI install
(``operator torchvision::nms does not exist``), and no CPU torchvision can be installed from PyPI.
So on a host where ``import torchvision.transforms`` fails, ``sam2_backend`` registers this module
as ``torchvision`` / ``torchvision.transforms`` only while it imports the predictor, then removes
it again; the predictor's own code runs unchanged. Where torchvision imports (GPU boxes) the real
transforms are used and this module is never loaded.

Each class reproduces torchvision's tensor path for the way SAM2 calls it:

* ``ToTensor()(ndarray HWC uint8)``: CHW float32 in [0, 1] (``/ 255``); other dtypes are
  converted to float32 without scaling, as torchvision does for non-byte arrays.
* ``Resize((h, w))`` on a float CHW tensor: bilinear, ``align_corners=False``, ``antialias=True``
  (torchvision's default since 0.17), via ``torch.nn.functional.interpolate``.
* ``Normalize(mean, std)``: ``(x - mean) / std`` per channel, not in place.

``Resize`` and ``Normalize`` are ``nn.Module``s with typed ``forward`` because SAM2 wraps them in
``torch.jit.script``.
"""

from __future__ import annotations

import types

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Normalize", "Resize", "ToTensor", "as_torchvision_modules"]


class ToTensor:
    """(H, W, C) or (H, W) array -> (C, H, W) float32 tensor; uint8 is scaled to [0, 1]."""

    def __call__(self, picture: np.ndarray) -> torch.Tensor:
        if not isinstance(picture, np.ndarray):
            raise TypeError(
                "torchvision shim ToTensor handles numpy arrays only (install torchvision for PIL "
                f"images), got {type(picture).__name__}"
            )
        if picture.ndim == 2:
            picture = picture[:, :, None]
        if picture.ndim != 3:
            raise ValueError(f"ToTensor: expected an (H, W, C) array, got shape {picture.shape}")
        tensor = torch.from_numpy(np.ascontiguousarray(picture.transpose(2, 0, 1)))
        if tensor.dtype == torch.uint8:
            return tensor.to(torch.float32).div(255.0)
        return tensor.to(torch.float32)


class Resize(nn.Module):
    """Resize a (C, H, W) or (B, C, H, W) float tensor to ``size`` = (h, w), antialiased bilinear."""

    def __init__(self, size: tuple[int, int]) -> None:
        super().__init__()
        if len(size) != 2:
            raise ValueError(f"Resize: size must be (h, w), got {size}")
        self.size = [int(size[0]), int(size[1])]

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        batched = image.dim() == 4
        if not batched:
            image = image.unsqueeze(0)
        out = F.interpolate(
            image, size=self.size, mode="bilinear", align_corners=False, antialias=True
        )
        if not batched:
            out = out.squeeze(0)
        return out


class Normalize(nn.Module):
    """``(x - mean) / std`` per channel of a (C, H, W) or (B, C, H, W) float tensor."""

    def __init__(self, mean: list[float], std: list[float]) -> None:
        super().__init__()
        if len(mean) != len(std):
            raise ValueError(f"Normalize: mean {mean} and std {std} differ in length")
        if any(s == 0 for s in std):
            raise ValueError(f"Normalize: std {std} has a zero")
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(-1, 1, 1))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return (image - self.mean.to(image.dtype)) / self.std.to(image.dtype)


def as_torchvision_modules() -> dict[str, types.ModuleType]:
    """Module objects named ``torchvision`` and ``torchvision.transforms`` exposing the shim."""
    package = types.ModuleType("torchvision")
    package.__doc__ = "autolabel shim (see autolabel/segmentation/_torchvision_shim.py)"
    package.__path__ = []  # a package, so ``import torchvision.transforms`` resolves
    transforms = types.ModuleType("torchvision.transforms")
    transforms.ToTensor = ToTensor
    transforms.Resize = Resize
    transforms.Normalize = Normalize
    package.transforms = transforms
    return {"torchvision": package, "torchvision.transforms": transforms}
