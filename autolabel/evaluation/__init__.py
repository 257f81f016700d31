"""Scoring labels with the official nuScenes metrics (nuscenes-devkit), one module per task."""
