"""The QA benchmark: export a run as a benchmark, parse model answers, score them.

- ``export``: ``export_benchmark`` (``autolabel bench export RUN --out BENCH``).
- ``answer_parser``: ``parse_answer``, a deterministic reader of free-text answers.
- ``scoring``: tolerances, LSR@t, MLSR, TLC, per-dimension SR, accuracies; ``score_benchmark``
  (``autolabel bench score BENCH ANSWERS.jsonl``).
- ``baselines``: oracle, constant and random answer files.
"""
