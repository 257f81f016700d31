"""Spatial and spatiotemporal QA generation grounded in Set-of-Mark region ids, and its checker.

- ``templates``: question/answer templates as data (``qa_templates/*.yaml``), loaded and validated.
- ``quantities``: what a question asks about, computed from attribute rows (vectorized);
  ``dynamic`` adds actions, counts, temporal order, colours and captions, from the tracks
  (``motion``: the rules) and the colours measured under the masks (``appearance``).
- ``candidates``: which regions (and horizons, cameras) a question type may ask about.
- ``grounding``: inputs: ``KeyframeRegions`` (region id -> track, boxes, RLE masks), ``ClipQAMeta``.
- ``sampling``: ``QAConfig``, keyframe windows and their pose-based de-duplication, balanced
  selection.
- ``generate``: ``generate_clip_qa`` and ``write_qa_jsonl``.
- ``records``: the ``qa.jsonl`` record schema and rendering shared with the checker.
- ``check``: ``check_clip_qa`` / ``check_qa_run`` (``autolabel check-qa RUN``).
"""

from autolabel.qa.generate import QA_FILE, generate_clip_qa, write_qa_jsonl
from autolabel.qa.grounding import ClipQAMeta, KeyframeRegions
from autolabel.qa.sampling import QAConfig, select_keyframes
from autolabel.qa.templates import TemplateError, load_templates

__all__ = [
    "QA_FILE",
    "ClipQAMeta",
    "KeyframeRegions",
    "QAConfig",
    "TemplateError",
    "generate_clip_qa",
    "load_templates",
    "select_keyframes",
    "write_qa_jsonl",
]
