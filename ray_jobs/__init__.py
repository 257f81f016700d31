"""Ray entrypoints: the ``autolabel run`` pipeline fanned out over clips on a Ray cluster.

- ``cluster``: start a local cluster sized to the machine, or join one (``--ray ADDRESS``, or the
  cluster of a ``ray job submit`` job).
- ``actors``: the model actors, ``DetectorWorker`` and ``SegmenterWorker``: each loads its model
  once (``num_gpus`` from the run config's ``ray`` section) and serves batches of keyframes or
  camera images.
- ``clip_tasks``: the CPU stages as Ray tasks (read check and hashes; write detections, track,
  attributes, project views; write masks, visibility, marks, QA, manifest).
- ``run_clips``: the driver that schedules them clip by clip with a progress bar, and the
  ``python -m ray_jobs.run_clips`` entrypoint for ``ray job submit``.

The stage functions are those of :mod:`autolabel.stages` (a Ray job only moves them between
processes), so a Ray run writes the same bytes as ``autolabel run`` without ``--ray``. System
failures (a worker or actor process dying) are retried by Ray; a stage's own exception fails its
clip and is recorded in the run summary, as in a local run.
"""
