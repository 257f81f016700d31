"""Configuration as data: dataclasses with defaults, filled from YAML and validated on load.

Errors name the file and the key (``config.yaml: tracker_options.max_age: expected int, got 'x'``).
"""

from __future__ import annotations

import dataclasses
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


@dataclass
class PipelineConfig:
    """Settings of ``autolabel run``; each ``*_options`` mapping is validated by its stage.

    Attributes:
        seed: seed of every random choice (noise models, sampling), for byte-identical output.
        detector: backend name (``lidar``, ``gt``, ``results``, ``bevfusion``).
        tracker: tracker name (``pub``).
    """

    seed: int = 0
    detector: str = "lidar"
    detector_options: dict = field(default_factory=dict)
    tracker: str = "pub"
    tracker_options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise ValueError("seed: must be >= 0")


def load_pipeline_config(path: str | Path | None = None, **overrides: Any) -> PipelineConfig:
    """Read a YAML config (or the defaults when ``path`` is None) and apply keyword overrides."""
    data: dict[str, Any] = {}
    where = "config"
    if path is not None:
        path = Path(path)
        where = str(path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        data = dict(loaded or {})
    data.update({k: v for k, v in overrides.items() if v is not None})
    return dataclass_from_mapping(PipelineConfig, data, where)
