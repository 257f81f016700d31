"""Synthetic nuScenes-format clips: a procedural world, ray-cast cameras and LiDAR, a writer."""
