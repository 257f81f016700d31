"""Per-image ground truth of synthetic datasets: side files next to the nuScenes tables.

These files are not part of the nuScenes format; the devkit ignores them. For every keyframe
camera image (one nuScenes ``sample_data`` of a ``CAM_*`` channel with ``is_key_frame``) the
generator writes, under ``<dataroot>/synth_gt/``::

    config.json                                 the SynthConfig that generated the dataset
    scenes.json                                 per scene: the ego's scenario and every object's
                                                class, situation and instance (below)
    <CHANNEL>/<sample_data_token>.json          the image's index (below)
    <CHANNEL>/<sample_data_token>_ids.png       16-bit instance-id buffer (H, W)
    <CHANNEL>/<sample_data_token>_face.png      1-bit mask, 1 on visible face (head) pixels
    <CHANNEL>/<sample_data_token>_plate.png     1-bit mask, 1 on visible licence-plate pixels

Masks are 1-bit greyscale PNGs (OpenCV reads them as 0 / 255, Pillow as mode "1").
Id buffer: 0 where no listed object is the surface seen (sky, ground, buildings); ``k`` where the
object ``objects[k - 1]`` of the index is. Objects are listed when they would cover at least one
pixel of the image with nothing else in the scene (so fully occluded objects are listed with
``visible_px`` 0 and appear nowhere in the buffer).

Index JSON (``ImageGroundTruth``): ``sample_data_token``, ``sample_token``, ``scene_token``,
``channel``, ``timestamp`` (microseconds), ``width``, ``height``, ``ids_png`` / ``face_png`` /
``plate_png`` (paths relative to the dataroot) and ``objects``, a list of:

* ``id``: value in the id buffer (position in the list + 1);
* ``object_index``: the object's index within its scene;
* ``instance_token``: its nuScenes instance, or null when the object has no annotation at all
  (never had a LiDAR point at a keyframe);
* ``annotation_token``: its ``sample_annotation`` at this image's sample, or null when none was
  written (no LiDAR point inside the box at that keyframe);
* ``category_name``, ``detection_name``, ``attribute_name`` ('' for classes without attributes);
* ``visible_px``: pixels where the object is the surface seen;
* ``unoccluded_px``: pixels the object would cover alone in the scene (same camera, no other
  objects, no buildings, no ground): ``visible_px / unoccluded_px`` is its visible fraction here;
* ``face_px``, ``plate_px``: visible face / plate pixels of the object;
* ``bbox_px``: [u_min, v_min, u_max, v_max] of its visible pixels (pixel edges, max exclusive),
  null when not visible;
* ``box``: ``translation`` (box centre), ``size`` (w, l, h) and ``rotation`` (quaternion w, x, y, z)
  in the global frame *at this image's timestamp* (cameras fire a few milliseconds after the
  LiDAR; the sample_annotation is at the LiDAR's time);
* ``velocity``: global (vx, vy) at this image's timestamp, m/s.

``scenes.json`` maps each scene name to ``scene_token``, ``ego_scenario`` (see
``ego_motion``), ``ego_lane``, ``ego_stop_window_s`` ([first, last] clip second the ego stands
still, or null) and ``objects``: ``object_index``, ``instance_token`` (null when never annotated),
``detection_name``, ``category_name``, ``situation`` (see ``scenario``: following, diverging,
overtaking, moving_away, oncoming, crossing, parked, construction, sidewalk), ``has_rider``,
``parked``.

A sample_annotation's ``visibility_token`` bins, over the six keyframe images of its sample, the
fraction sum(visible_px) / sum(unoccluded_px) (nuScenes bins 0-40, 40-60, 60-80, 80-100 %).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

GT_DIR = "synth_gt"


def index_path(dataroot: str | Path, channel: str, sample_data_token: str) -> Path:
    """Where the index JSON of a keyframe camera image lives."""
    return Path(dataroot) / GT_DIR / channel / f"{sample_data_token}.json"


def relative_paths(channel: str, sample_data_token: str) -> dict[str, str]:
    """Dataroot-relative paths of an image's side files (index, ids, face, plate)."""
    base = f"{GT_DIR}/{channel}/{sample_data_token}"
    return {
        "index": f"{base}.json",
        "ids_png": f"{base}_ids.png",
        "face_png": f"{base}_face.png",
        "plate_png": f"{base}_plate.png",
    }


@dataclass
class ImageGroundTruth:
    """The side files of one keyframe camera image, loaded.

    Attributes:
        index: the parsed index JSON (see the module docstring).
        ids: (H, W) uint16 id buffer.
        face_mask, plate_mask: (H, W) bool.
    """

    index: dict
    ids: np.ndarray
    face_mask: np.ndarray
    plate_mask: np.ndarray

    def object_mask(self, object_id: int) -> np.ndarray:
        """(H, W) bool visible pixels of the object with id ``object_id``."""
        return self.ids == object_id


def _read_png(path: Path, dtype: type) -> np.ndarray:
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise FileNotFoundError(f"{path}: missing or not a PNG")
    if img.dtype != dtype or img.ndim != 2:
        raise ValueError(f"{path}: expected a single-channel {np.dtype(dtype).name} PNG")
    return img


def load_image_ground_truth(
    dataroot: str | Path, channel: str, sample_data_token: str
) -> ImageGroundTruth:
    """Read the side files of a keyframe camera image.

    Raises:
        FileNotFoundError: the dataset has no side files for this image (naming the path).
    """
    root = Path(dataroot)
    path = index_path(root, channel, sample_data_token)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no synthetic ground truth for this image")
    index = json.loads(path.read_text())
    ids = _read_png(root / index["ids_png"], np.uint16)
    face = _read_png(root / index["face_png"], np.uint8) > 0  # OpenCV expands 1-bit to 0 / 255
    plate = _read_png(root / index["plate_png"], np.uint8) > 0
    if ids.shape != (index["height"], index["width"]):
        raise ValueError(f"{root / index['ids_png']}: size differs from the index's")
    return ImageGroundTruth(index, ids, face, plate)
