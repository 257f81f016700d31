"""autolabel: auto-label nuScenes-format driving logs and generate spatial / spatiotemporal QA."""

__version__ = "0.1.0"
