"""Offboard refinement of a clip's tracks with the whole clip in view (the ``refine`` stage).

See :func:`autolabel.refine.tracks.refine_tracks`.
"""

from autolabel.refine.config import RefineConfig
from autolabel.refine.tracks import RefineSummary, refine_tracks

#: Values of a run config's ``refine`` key.
REFINE_METHODS: tuple[str, ...] = ("track", "none")

__all__ = ["REFINE_METHODS", "RefineConfig", "RefineSummary", "refine_tracks"]
