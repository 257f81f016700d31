"""Releases against a careful adversary (issue 20): the default salt cannot be recomputed from
public data, and the leak scanner finds identifiers however they are spelled."""

from __future__ import annotations

import hashlib
import json
import stat

import pyarrow.parquet as pq
import pytest
from release_run import build_run, make_synth_dataset

from autolabel.anonymize import AnonymizeConfig
from autolabel.atomic_io import current_umask
from autolabel.release import ReleaseConfig, build_release, scan_release
from autolabel.release.records import rekey
from autolabel.release.salt import SALT_FILE


@pytest.mark.slow
def test_default_salt_is_a_kept_secret_not_a_hash_of_the_data(tmp_path):
    dataroot = make_synth_dataset(tmp_path / "data", scenes=1, seconds=3.0)
    run = build_run(dataroot, tmp_path / "run")
    config = ReleaseConfig(frames="keyframe", anonymize=AnonymizeConfig(learned_faces=False))
    build_release(run, tmp_path / "rel", config)
    clip = sorted(p.parent.name for p in run.glob("*/qa.jsonl"))[0]
    clip_ids = {
        clip_id
        for path in (tmp_path / "rel").rglob("*.parquet")
        for clip_id in pq.read_table(path, columns=["clip_id"]).column("clip_id").to_pylist()
    }
    # Whoever re-runs the public data knows the QA bytes: the old default salt.
    public = hashlib.sha256((run / clip / "qa.jsonl").read_bytes()).hexdigest()
    assert rekey(public, "clip", clip) not in clip_ids
    # The secret is in the run folder, readable by its owner only, and gives the ids.
    salt_path = run / SALT_FILE
    secret = salt_path.read_text().strip()
    assert len(secret) == 64
    assert stat.S_IMODE(salt_path.stat().st_mode) == 0o600
    assert clip_ids == {rekey(secret, "clip", clip)}
    # Release files and folders follow the umask (issue 20.20), as the secret's file does not.
    mask = current_umask()
    rel = tmp_path / "rel"
    assert stat.S_IMODE(rel.stat().st_mode) == 0o777 & ~mask
    assert {stat.S_IMODE(p.stat().st_mode) for p in rel.rglob("*") if p.is_file()} == {
        0o666 & ~mask
    }
    # A second release of the same run keeps the ids (same secret).
    build_release(run, tmp_path / "rel2", config)
    assert salt_path.read_text().strip() == secret
    assert sorted(p.read_bytes() for p in (tmp_path / "rel").rglob("*.parquet")) == sorted(
        p.read_bytes() for p in (tmp_path / "rel2").rglob("*.parquet")
    )


@pytest.mark.parametrize(
    ("planted", "kind"),
    [
        ("ABCDEF0123456789ABCDEF0123456789", "token"),
        ("01234567-89ab-cdef-0123-456789abcdef", "token"),
        ("1532402927.612", "timestamp"),
        ("1532402927", "timestamp"),
        ("1532402927612", "timestamp"),
        ("n015 2018 07 24 11 22 45 singapore", "log_name"),
        ("2018_07_24 11:22:45", "log_name"),
    ],
)
def test_leak_scanner_finds_identifiers_however_spelled(tmp_path, planted, kind):
    conv = tmp_path / "conversations" / "llava_train.json"
    conv.parent.mkdir()
    clean = [{"id": "qa-abcdefghijklmnop", "conversations": [{"value": "Region [3] is 12.5 m"}]}]
    conv.write_text(json.dumps(clean))
    assert scan_release(tmp_path) == []
    clean[0]["conversations"][0]["value"] += f" ({planted})"
    conv.write_text(json.dumps(clean))
    assert kind in {leak.kind for leak in scan_release(tmp_path)}


def test_leak_scanner_finds_numbers_in_epoch_seconds_and_known_values_in_any_case(tmp_path):
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({"mean_speed_mps": 3.2, "t0": 1532402927.612}))
    assert [leak.kind for leak in scan_release(tmp_path)] == ["timestamp"]
    stats.write_text(json.dumps({"note": "from the SCENE-0061 drive"}))
    assert [leak.kind for leak in scan_release(tmp_path, ["scene-0061"])] == ["known_value"]
