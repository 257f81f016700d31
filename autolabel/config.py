"""Configuration as data: dataclasses with defaults, filled from YAML and validated on load.

Errors name the file and the key (``config.yaml: tracker_options.max_age: expected int, got 'x'``).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is missing, unknown or of the wrong type; the message names the key."""


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{where}: invalid value {value!r}")
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return dataclass_from_mapping(hint, value, where)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        args = typing.get_args(hint)
        item = args[0] if args else Any
        items = [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(value):  # .inf / .nan would pass every range check, then break
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def dataclass_from_mapping(cls: type[T], data: Mapping[str, Any], where: str = "config") -> T:
    """Build dataclass ``cls`` from a mapping, checking keys and types; defaults fill the rest.

    Raises:
        ConfigError: an unknown key, a missing required key, or a value of the wrong type, or a
            ``ValueError`` raised by the dataclass's own validation, with ``where`` and the key.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(names))})"
        )
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def config_to_dict(obj: Any) -> Any:
    """A JSON-ready dict of a (nested) config dataclass, tuples as lists."""
    if dataclasses.is_dataclass(obj):
        return {f.name: config_to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [config_to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: config_to_dict(v) for k, v in obj.items()}
    return obj


@dataclass(frozen=True)
class ReadOptions:
    """How clips are read.

    Attributes:
        max_sweeps: LiDAR sweeps listed per keyframe, its own included (multi-sweep detectors use
            up to this many; every listed sweep is part of the inputs hash).
        cameras: camera channels to use (empty: every camera of the keyframes, nuScenes' six in
            rig order first).
    """

    max_sweeps: int = 10
    cameras: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_sweeps < 1:
            raise ValueError(f"max_sweeps: must be >= 1, got {self.max_sweeps}")


@dataclass(frozen=True)
class SegmentOptions:
    """Which projected objects are segmented (per keyframe x camera x tracked object).

    Attributes:
        max_distance_m: objects whose centre is farther than this from the camera are skipped.
        min_box_px: objects whose projected box, clipped to the image, covers fewer pixels are
            skipped (nothing a mask or a question could use).
        min_in_image_fraction: objects with less of their projected box inside the image are
            skipped.
        seed_sweeps: LiDAR sweeps whose points inside the box are the object's own returns (1:
            the keyframe's own; 2, the default: also the sweep before it, so the returns bracket
            the cameras' capture times, which precede the keyframe sweep). Each sweep is tested
            against the box moved back by the track's velocity to that sweep's time.
        motion_compensate: move each box (and its seed points) by its track velocity to the
            camera's capture time before projecting (cameras fire up to ~50 ms away from the
            LiDAR in nuScenes, 100 ms in PandaSet): from the keyframe's LiDAR time, or, where the
            clip's cameras fire as the beams pass them (:mod:`autolabel.sweep_timing`), from the
            instant the beams crossed the box.
        occluder_min_height_m: LiDAR returns lower than this above the ego ground plane (ego z,
            metres) are road, never an occluder; the rest may hide an object (the LiDAR-depth
            occlusion share).
        occluder_radius_deg: angle around a LiDAR return (about the beam spacing) whose pixels
            it speaks for, degrees (pixels = focal length x tan).
        occluder_margin_m: a return hides an object where it is more than this nearer than the
            object's nearest box corner, metres.
    """

    max_distance_m: float = 150.0
    min_box_px: float = 16.0
    min_in_image_fraction: float = 0.0
    seed_sweeps: int = 2
    motion_compensate: bool = True
    occluder_min_height_m: float = 0.3
    occluder_radius_deg: float = 0.25
    occluder_margin_m: float = 0.5

    def __post_init__(self) -> None:
        if not self.max_distance_m > 0:
            raise ValueError(f"max_distance_m: must be > 0, got {self.max_distance_m}")
        if self.min_box_px < 0:
            raise ValueError(f"min_box_px: must be >= 0, got {self.min_box_px}")
        if not 0 <= self.min_in_image_fraction <= 1:
            raise ValueError(
                f"min_in_image_fraction: must be in [0, 1], got {self.min_in_image_fraction}"
            )
        if self.seed_sweeps < 1:
            raise ValueError(f"seed_sweeps: must be >= 1, got {self.seed_sweeps}")
        if not 0 < self.occluder_radius_deg <= 5:
            raise ValueError(
                f"occluder_radius_deg: must be in (0, 5], got {self.occluder_radius_deg}"
            )
        if self.occluder_margin_m < 0:
            raise ValueError(f"occluder_margin_m: must be >= 0, got {self.occluder_margin_m}")


@dataclass(frozen=True)
class TrackFilterOptions:
    """Which tracked boxes become labels (attributes, masks, marks, QA).

    Detection and tracking files keep every box (the metrics want low-score boxes too); the
    labels keep confident tracks only.

    Attributes:
        min_track_score: a track is kept when the mean score of its boxes reaches this.
        min_track_length: ... and it has at least this many boxes (keyframes).
    """

    min_track_score: float = 0.0
    min_track_length: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.min_track_score <= 1:
            raise ValueError(f"min_track_score: must be in [0, 1], got {self.min_track_score}")
        if self.min_track_length < 1:
            raise ValueError(f"min_track_length: must be >= 1, got {self.min_track_length}")


def _stage_configs():
    # Imported here: the stage modules import heavy libraries (OpenCV, pycocotools) and
    # ``detectors`` imports this module.
    from autolabel.attributes import AttributeConfig
    from autolabel.qa.sampling import QAConfig
    from autolabel.set_of_mark import MarkStyle
    from autolabel.visibility import VisibilityConfig

    return AttributeConfig, VisibilityConfig, MarkStyle, QAConfig


@dataclass
class PipelineConfig:
    """Settings of ``autolabel run`` (every stage); validated on construction, errors name the key.

    Attributes:
        seed: seed of every random choice of the run (QA sampling and phrasing use it; a
            detector's own noise seed is one of its ``detector_options``), for byte-identical
            output.
        read: how clips are read (``ReadOptions``).
        detector: backend name (``lidar``, ``gt``, ``results``, ``bevfusion``);
            ``detector_options``: that backend's options (its config dataclass's fields).
        tracker: tracker name (``pub``); ``tracker_options``: its options.
        refine: offboard track refinement after tracking (``track``: the whole-clip refinement of
            ``autolabel.refine``; ``none``: the tracker's boxes are the labels);
            ``refine_options``: ``autolabel.refine.RefineConfig`` fields.
        labels: which tracks become labels (``TrackFilterOptions``).
        attributes: ``autolabel.attributes.AttributeConfig`` fields.
        segmenter: segmentation backend (``geometric``, the default, ``lidar``, ``sam2``);
            ``segmenter_options``: its options.
        segment: which projected objects are segmented (``SegmentOptions``).
        visibility: ``autolabel.visibility.VisibilityConfig`` thresholds; keys not given take
            the segmenter's defaults (``autolabel.visibility.visibility_defaults``).
        marks: ``autolabel.set_of_mark.MarkStyle`` of the Set-of-Mark images.
        marks_stitched: also write the stitched six-camera view per keyframe.
        marks_stitched_width_px: the stitched view's largest width, pixels (a display's; its
            tiles are the cameras shrunk to a third of it); 0: the cameras' own resolution.
        qa: ``autolabel.qa.QAConfig`` (its ``seed`` is this config's ``seed``).
        check_qa: re-derive every QA answer after generation; a mismatch fails the clip.
        cv_threads: OpenCV's threads in each process that runs stages (process-wide, set when
            its models are built); 0 keeps OpenCV's default (one per core). Its calls here are
            small (crops) or one clip per core (Ray), where a thread pool only adds CPU time
            on shared cores: 1 cut the segment stage's CPU by about 8 %.
    """

    seed: int = 0
    read: ReadOptions = field(default_factory=ReadOptions)
    detector: str = "lidar"
    detector_options: dict = field(default_factory=dict)
    tracker: str = "pub"
    tracker_options: dict = field(default_factory=dict)
    refine: str = "track"
    refine_options: dict = field(default_factory=dict)
    labels: TrackFilterOptions = field(default_factory=TrackFilterOptions)
    attributes: Any = None
    segmenter: str = "geometric"
    segmenter_options: dict = field(default_factory=dict)
    segment: SegmentOptions = field(default_factory=SegmentOptions)
    visibility: Any = None
    marks: Any = None
    marks_stitched: bool = True
    marks_stitched_width_px: int = 2400
    qa: Any = None
    check_qa: bool = True
    cv_threads: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed: must be an integer >= 0, got {self.seed!r}")
        threads = self.cv_threads
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
            raise ConfigError(f"cv_threads: must be an integer >= 0, got {threads!r}")
        width = self.marks_stitched_width_px
        if isinstance(width, bool) or not isinstance(width, int) or not (width == 0 or width >= 3):
            raise ConfigError(
                f"marks_stitched_width_px: must be 0 or an integer >= 3, got {width!r}"
            )
        attribute_cls, visibility_cls, mark_cls, qa_cls = _stage_configs()
        self.attributes = _section(self.attributes, attribute_cls, "attributes")
        self.visibility = _visibility_section(self.visibility, self.segmenter)
        self.marks = _section(self.marks, mark_cls, "marks")
        qa = _section(self.qa, qa_cls, "qa")
        if qa.seed not in (0, self.seed):
            raise ConfigError("qa.seed: QA uses the top-level seed; set seed instead")
        self.qa = dataclasses.replace(qa, seed=self.seed)
        self._check_backends()

    def _check_backends(self) -> None:
        """Validate the backend names and their options now, not when the first clip runs."""
        from autolabel.segmentation import SEGMENTER_NAMES
        from autolabel.segmentation.core import config_from_mapping
        from detectors import DETECTOR_NAMES, detector_config_class
        from trackers import TRACKERS

        if self.detector not in DETECTOR_NAMES:
            raise ConfigError(
                f"detector: unknown {self.detector!r}; choose one of {', '.join(DETECTOR_NAMES)}"
            )
        dataclass_from_mapping(
            detector_config_class(self.detector), self.detector_options, "detector_options"
        )
        if self.tracker not in TRACKERS:
            raise ConfigError(
                f"tracker: unknown {self.tracker!r}; choose one of {', '.join(sorted(TRACKERS))}"
            )
        dataclass_from_mapping(TRACKERS[self.tracker][1], self.tracker_options, "tracker_options")
        from autolabel.refine import REFINE_METHODS, RefineConfig

        if self.refine not in REFINE_METHODS:
            raise ConfigError(
                f"refine: unknown {self.refine!r}; choose one of {', '.join(REFINE_METHODS)}"
            )
        dataclass_from_mapping(RefineConfig, self.refine_options, "refine_options")
        if self.segmenter not in SEGMENTER_NAMES:
            raise ConfigError(
                f"segmenter: unknown {self.segmenter!r}; choose one of {', '.join(SEGMENTER_NAMES)}"
            )
        module_name, class_name = _SEGMENTER_CONFIGS[self.segmenter]
        try:
            config_from_mapping(
                getattr(importlib.import_module(module_name), class_name),
                self.segmenter_options,
                self.segmenter,
            )
        except (TypeError, ValueError) as e:
            raise ConfigError(f"segmenter_options: {e}") from None


#: Segmenter name -> (module, options dataclass), to validate options without building the model.
_SEGMENTER_CONFIGS = {
    "geometric": ("autolabel.segmentation.geometric", "GeometricConfig"),
    "lidar": ("autolabel.segmentation.lidar_seeded", "LidarSeededConfig"),
    "sam2": ("autolabel.segmentation.sam2_backend", "Sam2Config"),
}


def _visibility_section(value: Any, segmenter: str) -> Any:
    """The visibility thresholds: the segmenter's defaults, overridden by the keys given."""
    from autolabel.visibility import VisibilityConfig, visibility_defaults

    if isinstance(value, VisibilityConfig):
        return value
    defaults = visibility_defaults(segmenter)
    if value is None:
        return defaults
    if not isinstance(value, Mapping):
        raise ConfigError(f"visibility: expected a mapping, got {type(value).__name__}")
    merged = {**{f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)}, **value}
    return dataclass_from_mapping(VisibilityConfig, merged, "visibility")


def _section(value: Any, cls: type, key: str) -> Any:
    """A stage's config dataclass from None (defaults), an instance, or a mapping of its fields."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        return dataclass_from_mapping(cls, value, key)
    raise ConfigError(f"{key}: expected a mapping of {cls.__name__} fields, got {value!r}")


@dataclass(frozen=True)
class RayOptions:
    """How ``autolabel run --ray`` spreads clips over a Ray cluster (not part of the outputs:
    changing these never changes a byte of the labels, so they are not in the manifest's hash).

    Attributes:
        num_cpus, num_gpus: size of a local cluster started by the run (None: the machine's);
            ignored when joining a cluster.
        detect_actors, segment_actors: model actors (each loads its model once); None: one per
            GPU for GPU backends, one per CPU for CPU backends (the LiDAR-seeded segmenter is
            CPU-bound).
        detect_num_gpus, segment_num_gpus: GPUs per actor; None: 1 for GPU backends (``bevfusion``,
            ``sam2``) when the cluster has GPUs, else 0.
        detect_batch_frames: keyframes per detector actor call.
        segment_batch_images: camera images per segmenter actor call.
        task_num_cpus: CPUs per CPU-stage task.
        max_retries: retries of a CPU task whose worker died (system failures; a stage's own error
            is recorded for its clip, never retried).
        max_restarts: restarts of a model actor whose process died (its pending calls are retried).
        max_clips_in_flight: clips admitted at once (bounds memory); 0: twice the cluster's CPUs.
        actor_resources, task_resources: custom Ray resources each model actor / CPU task
            requires, to place them on the nodes that offer them (e.g. ``{"model_node": 1}``
            for actors on nodes started with ``ray start --resources '{"model_node": 4}'``).
        check_paths: before the first clip, check on every node that the dataroot is readable
            and that ``OUT`` is the same writable folder the driver sees (a node-local path
            fails here, naming the path and the node, instead of in every clip).
    """

    num_cpus: int | None = None
    num_gpus: int | None = None
    detect_actors: int | None = None
    segment_actors: int | None = None
    detect_num_gpus: float | None = None
    segment_num_gpus: float | None = None
    detect_batch_frames: int = 8
    segment_batch_images: int = 24
    task_num_cpus: float = 1.0
    max_retries: int = 3
    max_restarts: int = 3
    max_clips_in_flight: int = 0
    actor_resources: dict[str, float] = field(default_factory=dict)
    task_resources: dict[str, float] = field(default_factory=dict)
    check_paths: bool = True

    def __post_init__(self) -> None:
        for key in ("actor_resources", "task_resources"):
            for name, amount in getattr(self, key).items():
                if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount < 0:
                    raise ValueError(f"{key}.{name}: must be a number >= 0, got {amount!r}")
        for key in ("num_cpus", "num_gpus"):
            value = getattr(self, key)
            if value is not None and value < 0:
                raise ValueError(f"{key}: must be >= 0, got {value}")
        for key in (
            "detect_actors",
            "segment_actors",
            "detect_batch_frames",
            "segment_batch_images",
        ):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ValueError(f"{key}: must be >= 1, got {value}")
        for key in ("detect_num_gpus", "segment_num_gpus"):
            value = getattr(self, key)
            if value is not None and value < 0:
                raise ValueError(f"{key}: must be >= 0, got {value}")
        if not self.task_num_cpus > 0:
            raise ValueError(f"task_num_cpus: must be > 0, got {self.task_num_cpus}")
        for key in ("max_retries", "max_restarts", "max_clips_in_flight"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key}: must be >= 0, got {getattr(self, key)}")


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file; errors name the file."""
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(loaded).__name__}")
    return dict(loaded)


def load_run_config(
    path: str | Path | None = None, **overrides: Any
) -> tuple[PipelineConfig, RayOptions]:
    """Read a YAML run config: its ``ray`` section as ``RayOptions``, the rest as ``PipelineConfig``.

    ``overrides`` (not None) replace top-level pipeline keys (the command line's ``--detector``,
    ``--segmenter``, ...). Errors name the file and the key.
    """
    where = "config"
    data: dict[str, Any] = {}
    if path is not None:
        where = str(path)
        data = read_yaml_mapping(Path(path))
    ray_data = data.pop("ray", None) or {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        config = dataclass_from_mapping(PipelineConfig, data, where)
        ray_options = dataclass_from_mapping(RayOptions, ray_data, f"{where}: ray")
    except ConfigError as e:
        message = str(e)
        raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from None
    return config, ray_options


def load_pipeline_config(path: str | Path | None = None, **overrides: Any) -> PipelineConfig:
    """Read a YAML config (or the defaults when ``path`` is None) and apply keyword overrides."""
    return load_run_config(path, **overrides)[0]


def load_dataclass_config(cls: type[T], path: str | Path | None = None, **overrides: Any) -> T:
    """Dataclass ``cls`` from a YAML file of its fields (defaults when ``path`` is None), with
    keyword overrides applied (None values ignored). Errors name the file and the key."""
    data = read_yaml_mapping(Path(path)) if path is not None else {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    return dataclass_from_mapping(cls, data, str(path) if path is not None else cls.__name__)
