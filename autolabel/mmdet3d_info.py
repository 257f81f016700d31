"""Import mmdet3d nuScenes info files (``.pkl``, info format v2) into our records.

An info file holds per sample: ``ego2global`` (4x4), ``lidar_points.lidar2ego`` (4x4), per camera
``cam2img``, ``cam2ego``, ``lidar2cam``, ``img_path``, and ``instances`` with ``bbox_3d`` in the
LiDAR frame, ``bbox_label_3d``, ``velocity`` (LiDAR frame, m/s) and ``num_lidar_pts``.

Cameras are built from ``cam2ego`` and ``cam2img``; ``lidar2cam`` is derived data and is not
used (early mmdet3d converters wrote it with a wrong translation: minus the camera's position in
the LiDAR frame, unrotated; nuScenes' own excerpt shows it, see tests/test_realdata.py).

Pickles can run code when loaded, so they are read with an unpickler that only builds plain
containers and numpy arrays and refuses every other global; arrays are rebuilt here from their
raw bytes with a checked numeric or text dtype (numpy's own unpickling hooks would build an
object array from raw bytes, i.e. from pointers the file chooses).

``bbox_3d`` conventions (established on real nuScenes infos, see tests/test_realdata.py):

- ``"legacy"`` (mmdet3d < 1.0 converters, also carried over into v2 files by
  ``update_infos_to_v2``): ``(x, y, z, w, l, h, r)``, centre at the box's gravity centre,
  nuScenes yaw = ``-r - pi/2``;
- ``"v1"`` (mmdet3d >= 1.0 converters): ``(x, y, z, l, w, h, yaw)``, gravity centre, nuScenes yaw.

(mmdet3d moves z to the bottom centre only when it builds ``LiDARInstance3DBoxes`` at load time;
the info files keep the gravity centre.) ``"auto"`` tells them apart by which size entry is the
longer side of elongated boxes (the length), which no yaw convention can change.
"""

from __future__ import annotations

import builtins
import codecs
import collections
import io
import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.sensors import CameraCalibration
from calib.rotation import wrap_angle
from calib.se3 import SE3

BoxConvention = Literal["auto", "legacy", "v1"]


class InfoFileError(ValueError):
    """An info file is unreadable, refused or malformed (the message names the file)."""


#: dtype kinds an info array may have: booleans, integers, floats, complex, bytes and text. Never
#: objects: an object array's elements are pointers, and rebuilding one from pickled raw bytes
#: would dereference whatever addresses the file holds.
_ARRAY_KINDS = frozenset("biufcSU")


class _DtypeSpec:
    """Stands in for ``numpy.dtype`` while unpickling: records the type code and the pickled
    state, and builds the real dtype only from a checked plain kind and byte order (numpy's own
    ``dtype.__setstate__`` would accept any flags, fields or sub-arrays the file claims)."""

    def __init__(self, code, align=False, copy=True) -> None:
        if not isinstance(code, str):
            raise InfoFileError(f"dtype code must be a string, got {type(code).__name__}")
        try:
            self.base = np.dtype(code)
        except TypeError:
            raise InfoFileError(f"unknown dtype {code!r}") from None
        if self.base.kind not in _ARRAY_KINDS or self.base.fields or self.base.subdtype:
            raise InfoFileError(f"refusing dtype {code!r} (only plain numeric and text arrays)")
        self.byteorder = "="

    def __setstate__(self, state) -> None:
        if not isinstance(state, tuple) or len(state) < 5:
            raise InfoFileError(f"malformed dtype state {state!r:.80}")
        byteorder, subarray, names, fields = state[1:5]
        if subarray is not None or names is not None or fields is not None:
            raise InfoFileError("refusing a dtype with fields or sub-arrays")
        if byteorder not in ("<", ">", "|", "="):
            raise InfoFileError(f"malformed dtype byte order {byteorder!r}")
        self.byteorder = byteorder

    @property
    def dtype(self) -> np.dtype:
        if self.byteorder in ("<", ">"):
            return self.base.newbyteorder(self.byteorder)
        return self.base


def _array_from_bytes(raw, dtype, shape, fortran: bool = False) -> np.ndarray:
    if not isinstance(dtype, _DtypeSpec):
        raise InfoFileError(f"array dtype must be a numpy dtype, got {type(dtype).__name__}")
    if isinstance(raw, pickle.PickleBuffer):
        raw = raw.raw()
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise InfoFileError(f"array data must be raw bytes, got {type(raw).__name__}")
    if not isinstance(shape, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise InfoFileError(f"malformed array shape {shape!r:.80}")
    dt = dtype.dtype
    count = math.prod(shape)
    if len(raw) != count * dt.itemsize:
        raise InfoFileError(
            f"array of shape {shape} and dtype {dt} needs {count * dt.itemsize} bytes, "
            f"the file holds {len(raw)}"
        )
    flat = np.frombuffer(bytes(raw), dtype=dt, count=count)
    return flat.reshape(shape, order="F" if fortran else "C").copy()


class _NdarrayMarker:
    """Stands in for ``numpy.ndarray`` (only ever the first argument of ``_reconstruct``)."""


class _ArraySpec:
    """Stands in for an ndarray while unpickling; ``__setstate__`` receives numpy's array state
    ``(version, shape, dtype, is_fortran, raw bytes)`` and builds the array with
    ``_array_from_bytes``. Replaced by the array once the whole file is read."""

    array: np.ndarray | None = None

    def __setstate__(self, state) -> None:
        if isinstance(state, tuple) and len(state) == 5:
            state = state[1:]
        if not isinstance(state, tuple) or len(state) != 4:
            raise InfoFileError(f"malformed array state {state!r:.80}")
        shape, dtype, fortran, raw = state
        self.array = _array_from_bytes(raw, dtype, shape, bool(fortran))


def _reconstruct(cls, shape, typecode) -> _ArraySpec:
    if cls is not _NdarrayMarker:
        raise InfoFileError("refusing to reconstruct anything but a numpy array")
    return _ArraySpec()


def _scalar(dtype, raw=b""):
    return _array_from_bytes(raw, dtype, (1,))[0]


def _frombuffer(buf, dtype, shape, order="C") -> np.ndarray:
    return _array_from_bytes(buf, dtype, tuple(shape), order == "F")


#: Globals an info pickle may reference -> what the unpickler gives for them: numpy's array and
#: scalar rebuilders (numpy 1 and 2 names) become the checked stand-ins above, plain containers
#: are themselves, and ``_codecs.encode`` (protocol-2 pickles store bytes as
#: ``encode(str, 'latin1')``).
_SAFE_GLOBALS: dict[tuple[str, str], object] = {
    **{
        (module, name): value
        for module in ("numpy.core.multiarray", "numpy._core.multiarray")
        for name, value in (("_reconstruct", _reconstruct), ("scalar", _scalar))
    },
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "ndarray"): _NdarrayMarker,
    ("numpy", "dtype"): _DtypeSpec,
    ("_codecs", "encode"): codecs.encode,
    ("collections", "OrderedDict"): collections.OrderedDict,
    **{
        (module, name): getattr(builtins, name)
        for module in ("builtins", "__builtin__")  # protocol 2 writes Python 2's name
        for name in ("list", "dict", "tuple", "set", "frozenset", "bytes", "bytearray", "complex")
    },
}
ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(_SAFE_GLOBALS)


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, source: str):
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str):
        if (module, name) not in _SAFE_GLOBALS:
            raise InfoFileError(
                f"{self.source}: refusing to unpickle global {module}.{name} "
                "(only numpy arrays and plain containers are allowed)"
            )
        return _SAFE_GLOBALS[(module, name)]


def _materialise(obj, memo: dict[int, object]):
    """``obj`` with every array stand-in replaced by its array (containers rebuilt or updated)."""
    key = id(obj)
    if key in memo:
        return memo[key]
    if isinstance(obj, _ArraySpec):
        if obj.array is None:
            raise InfoFileError("an array without its data")
        out = obj.array
    elif isinstance(obj, (_DtypeSpec, _NdarrayMarker)) or obj is _NdarrayMarker:
        raise InfoFileError("a bare numpy dtype or class where data belongs")
    elif isinstance(obj, dict):
        memo[key] = obj
        items = [(_materialise(k, memo), _materialise(v, memo)) for k, v in obj.items()]
        obj.clear()
        obj.update(items)
        return obj
    elif isinstance(obj, list):
        memo[key] = obj
        obj[:] = [_materialise(v, memo) for v in obj]
        return obj
    elif isinstance(obj, (tuple, set, frozenset)):
        out = type(obj)(_materialise(v, memo) for v in obj)
    else:
        out = obj
    memo[key] = out
    return out


def load_info_pickle(path: str | Path) -> dict:
    """Unpickle an info file with the restricted unpickler; returns its top-level dict.

    Only plain containers and numeric or text numpy arrays are built; arrays are rebuilt from
    their raw bytes by this module (never by numpy's own pickle hooks), and object arrays are
    refused.

    Raises:
        FileNotFoundError: no such file; InfoFileError: a refused global or dtype, a corrupt
            pickle, or no ``data_list`` (the message names the file).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"info file {path} does not exist")
    data = path.read_bytes()
    try:
        info = _materialise(_RestrictedUnpickler(io.BytesIO(data), str(path)).load(), {})
    except InfoFileError as e:
        message = str(e)
        if message.startswith(str(path)):
            raise
        raise InfoFileError(f"{path}: {message}") from None
    except Exception as e:  # corrupt or truncated pickles raise many kinds of errors
        raise InfoFileError(f"{path}: not a readable pickle ({type(e).__name__}: {e})") from None
    if not isinstance(info, dict) or not isinstance(info.get("data_list"), list):
        raise InfoFileError(
            f"{path}: expected a dict with a 'data_list' list (mmdet3d info v2); got "
            f"{type(info).__name__} with keys {sorted(info) if isinstance(info, dict) else []}"
        )
    return info


@dataclass
class InfoSample:
    """One sample of an info file in our frames and types.

    Attributes:
        token: nuScenes sample token.
        timestamp_us: sample (LiDAR) time, microseconds.
        global_SE3_ego: ego pose at the LiDAR time (info files give no ego pose per camera).
        ego_SE3_lidar: LiDAR calibration.
        lidar_path: LiDAR file name as written in the info.
        cameras: channel -> calibration (``ego_SE3_camera`` from ``cam2ego``, K from ``cam2img``).
        image_paths: channel -> image file name as written in the info.
        boxes_lidar: ground truth in the LiDAR frame (``frame='lidar'``).
        boxes: the same boxes in the global frame.
        num_lidar_pts: (N,) LiDAR points in each box; ``valid``: (N,) ``bbox_3d_isvalid``.
    """

    token: str
    timestamp_us: int
    global_SE3_ego: SE3
    ego_SE3_lidar: SE3
    lidar_path: str
    cameras: dict[str, CameraCalibration]
    image_paths: dict[str, str]
    boxes_lidar: Boxes3D
    boxes: Boxes3D
    num_lidar_pts: np.ndarray
    valid: np.ndarray


def detect_box_convention(bbox_3d: np.ndarray, source: str = "") -> Literal["legacy", "v1"]:
    """Tell the ``bbox_3d`` size order from the data: in elongated boxes (one side 1.5 times the
    other) the length is the longer side; it comes 4th in ``v1`` and 5th in ``legacy``.

    Raises:
        InfoFileError: no elongated boxes, or they disagree.
    """
    size = np.asarray(bbox_3d, dtype=np.float64).reshape(-1, 7)[:, 3:5]
    first_long = size[:, 0] > 1.5 * size[:, 1]
    second_long = size[:, 1] > 1.5 * size[:, 0]
    n_first, n_second = int(first_long.sum()), int(second_long.sum())
    if n_first + n_second == 0 or min(n_first, n_second) > 0.1 * (n_first + n_second):
        raise InfoFileError(
            f"{source}: cannot tell the bbox_3d size order ({n_first} boxes longer in entry 3, "
            f"{n_second} in entry 4); pass box_convention='legacy' or 'v1'"
        )
    return "v1" if n_first > n_second else "legacy"


def boxes_from_bbox_3d(
    bbox_3d: np.ndarray,
    convention: Literal["legacy", "v1"],
    label: np.ndarray | None = None,
    velocity_mps: np.ndarray | None = None,
) -> Boxes3D:
    """LiDAR-frame ``Boxes3D`` from (N, 7+) mmdet3d ``bbox_3d`` rows (see the module docstring)."""
    b = np.asarray(bbox_3d, dtype=np.float64)
    if b.size == 0:
        b = b.reshape(0, 7)
    if b.ndim != 2 or b.shape[1] < 7:
        raise ValueError(f"bbox_3d must be (N, 7+) rows (x, y, z, sizes, yaw), got {b.shape}")
    if convention == "legacy":
        size_wlh = b[:, [3, 4, 5]]
        yaw = wrap_angle(-b[:, 6] - np.pi / 2)
    elif convention == "v1":
        size_wlh = b[:, [4, 3, 5]]
        yaw = wrap_angle(b[:, 6])
    else:
        raise ValueError(f"unknown bbox_3d convention {convention!r}; use 'legacy' or 'v1'")
    return Boxes3D(
        center_m=b[:, :3],
        size_wlh_m=size_wlh,
        yaw_rad=yaw,
        velocity_mps=velocity_mps,
        label=label,
        frame="lidar",
    )


def _matrix(value, shape: tuple[int, int], where: str) -> np.ndarray:
    m = np.asarray(value, dtype=np.float64)
    if m.shape == (4, 4) and shape == (3, 3):
        m = m[:3, :3]
    if m.shape != shape:
        raise InfoFileError(f"{where}: expected a {shape} matrix, got shape {m.shape}")
    return m


def _get(record: dict, key: str, where: str):
    if key not in record:
        raise InfoFileError(f"{where}: missing key {key!r}")
    return record[key]


def read_info_samples(
    path: str | Path,
    image_size_px: tuple[int, int] = (1600, 900),
    box_convention: BoxConvention = "auto",
) -> list[InfoSample]:
    """Read an mmdet3d info v2 ``.pkl`` into ``InfoSample`` records.

    Args:
        path: the info file.
        image_size_px: (width, height) of the images (info files do not record it; nuScenes'
            cameras are 1600x900).
        box_convention: ``bbox_3d`` layout, see the module docstring; ``auto`` detects it from
            the sizes of all boxes in the file.

    Labels are mapped by class name through ``metainfo`` (``classes``/``CLASSES`` or
    ``categories``) to our detection classes; instances with label -1 or a class we lack are
    dropped.
    """
    info = load_info_pickle(path)
    src = str(path)
    meta = info.get("metainfo", {}) or {}
    classes = meta.get("classes") or meta.get("CLASSES")
    if classes is None and isinstance(meta.get("categories"), dict):
        classes = [n for n, _ in sorted(meta["categories"].items(), key=lambda kv: kv[1])]
    if classes is None:
        raise InfoFileError(f"{src}: metainfo has no 'classes', 'CLASSES' or 'categories'")
    our_label = np.array([_class_or_minus_one(c) for c in classes] + [-1], dtype=np.int64)

    if box_convention == "auto":
        all_boxes = [inst["bbox_3d"] for s in info["data_list"] for inst in s.get("instances", [])]
        box_convention = detect_box_convention(np.asarray(all_boxes).reshape(-1, 7), src)

    width, height = image_size_px
    samples = []
    for i, s in enumerate(info["data_list"]):
        where = f"{src}: data_list[{i}]"
        global_SE3_ego = SE3.from_matrix(_matrix(_get(s, "ego2global", where), (4, 4), where))
        lidar = _get(s, "lidar_points", where)
        ego_SE3_lidar = SE3.from_matrix(
            _matrix(_get(lidar, "lidar2ego", f"{where}.lidar_points"), (4, 4), where)
        )
        cameras, image_paths = {}, {}
        for ch, img in (s.get("images") or {}).items():
            w = f"{where}.images[{ch}]"
            cameras[ch] = CameraCalibration(
                channel=ch,
                intrinsic=_matrix(_get(img, "cam2img", w), (3, 3), w),
                ego_SE3_camera=SE3.from_matrix(_matrix(_get(img, "cam2ego", w), (4, 4), w)),
                width_px=width,
                height_px=height,
            )
            image_paths[ch] = img.get("img_path", "")
        instances = s.get("instances") or []
        n = len(instances)
        bbox = np.array([_get(x, "bbox_3d", where)[:7] for x in instances]).reshape(n, 7)
        raw_label = np.array([x.get("bbox_label_3d", x.get("bbox_label", -1)) for x in instances])
        raw_label = np.asarray(raw_label, dtype=np.int64).reshape(n)
        label = our_label[np.where((raw_label >= 0) & (raw_label < len(classes)), raw_label, -1)]
        velocity = np.array(
            [x.get("velocity", [np.nan, np.nan])[:2] for x in instances], dtype=np.float64
        ).reshape(n, 2)
        keep = label >= 0
        boxes_lidar = boxes_from_bbox_3d(
            bbox[keep], box_convention, label=label[keep], velocity_mps=velocity[keep]
        )
        boxes = boxes_lidar.transform(ego_SE3_lidar, "ego", "lidar").transform(
            global_SE3_ego, "global", "ego"
        )
        samples.append(
            InfoSample(
                token=str(s.get("token", "")),
                timestamp_us=int(round(float(s.get("timestamp", 0.0)) * 1e6)),
                global_SE3_ego=global_SE3_ego,
                ego_SE3_lidar=ego_SE3_lidar,
                lidar_path=str(lidar.get("lidar_path", "")),
                cameras=cameras,
                image_paths=image_paths,
                boxes_lidar=boxes_lidar,
                boxes=boxes,
                num_lidar_pts=np.array(
                    [x.get("num_lidar_pts", -1) for x in instances], dtype=np.int64
                ).reshape(n)[keep],
                valid=np.array(
                    [bool(x.get("bbox_3d_isvalid", True)) for x in instances], dtype=bool
                ).reshape(n)[keep],
            )
        )
    return samples


def _class_or_minus_one(name: str) -> int:
    try:
        return class_index(name)
    except KeyError:
        return -1
