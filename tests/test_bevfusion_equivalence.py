"""The bevfusion backend's model inputs equal mmdet3d v1.4.0's own nuScenes path, to 1e-5.

Runs ``bench/bevfusion_input_equivalence.py`` (mmdet3d's info converter from the checkout, then
the BEVFusion config's test pipeline through ``NuScenesDataset``) on a small synthetic dataroot,
and checks the refusal of PandaSet's 1920x1080 cameras under the nuScenes crop. Needs the
OpenMMLab stack and ``MMDET3D_ROOT`` (an mmdetection3d v1.4.0 checkout); skipped elsewhere (CI).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from realdata import PANDASET, PANDASET_VERSION, realdata_dir, requires_realdata

pytest.importorskip("mmdet3d")
ROOT = os.environ.get("MMDET3D_ROOT", "")
if not (Path(ROOT) / "projects" / "BEVFusion").is_dir():
    pytest.skip("set MMDET3D_ROOT to an mmdetection3d v1.4.0 checkout", allow_module_level=True)

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bevfusion_input_equivalence.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bevfusion_input_equivalence", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def synthetic_dataroot(tmp_path_factory):
    from autolabel.synth.config import load_synth_config
    from autolabel.synth.generator import generate_dataset

    out = tmp_path_factory.mktemp("synth")
    # 1600x900 cameras (the nuScenes rig), a log starting without earlier sweeps.
    generate_dataset(out, load_synth_config(None, scenes=1, seconds=1.5, seed=5))
    return out


def test_every_model_input_equals_mmdet3d_on_synthetic_data(synthetic_dataroot, tmp_path, capsys):
    bench = _bench()
    argv = ["--mmdet3d-root", ROOT, "--dataroot", str(synthetic_dataroot)]
    argv += ["--version", "v1.0-mini", "--work", str(tmp_path), "--json", str(tmp_path / "t.json")]
    assert bench.main(argv) == 0, capsys.readouterr().out[-3000:]
    import json

    rows = json.loads((tmp_path / "t.json").read_text())
    for name in ("points", "img (pixels 0-255)", "lidar2img", "cam2img", "lidar2cam", "cam2lidar",
                 "img_aug_matrix", "lidar_aug_matrix"):  # fmt: skip
        assert rows[name]["samples"] >= 3 and rows[name]["max_abs_diff"] <= 1e-5, name


@requires_realdata(PANDASET)
def test_pandaset_cameras_are_refused_under_the_nuscenes_crop():
    from nuscenes.nuscenes import NuScenes

    from autolabel.nuscenes_reader import read_clip
    from detectors.bevfusion import ModelInputs, load_bevfusion_config

    bench = _bench()
    cfg, path = load_bevfusion_config(Path(ROOT), bench.LIDAR_CAM_CONFIG)
    nusc = NuScenes(PANDASET_VERSION, str(realdata_dir(PANDASET)), verbose=False)
    frame = read_clip(nusc, nusc.scene[0]["name"], with_ground_truth=False).frames[3]
    with pytest.raises(ValueError, match=r"CAM_FRONT.*leaves out its principal point"):
        ModelInputs(cfg, path)(frame)
    packed = ModelInputs(cfg, path, image_resize=0.367)(frame)
    assert tuple(packed["inputs"]["img"].shape) == (6, 3, 256, 704)
