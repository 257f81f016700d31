"""Anonymized, reproducible training releases of a run: Parquet, conversations, card, stats."""

from autolabel.release.leak_scan import Leak, ReleaseLeakError, scan_release
from autolabel.release.writer import ReleaseConfig, build_release

__all__ = ["Leak", "ReleaseConfig", "ReleaseLeakError", "build_release", "scan_release"]
