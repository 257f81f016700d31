"""``autolabel eval qa``: association, re-answering from the reference, agreement and misses."""

from __future__ import annotations

import numpy as np
import pytest
from qa_runs import lane_tracks, write_qa_run

from autolabel.evaluation.label_quality import (
    LabelQualityConfig,
    associate_frame,
    evaluate_label_quality,
    format_label_quality,
)
from autolabel.qa.scenes import scene_from_tracks


def test_greedy_follows_score_order_and_hungarian_minimises_distance():
    cand = np.array([[0.0, 0.0], [1.5, 0.0]])
    ref = np.array([[1.0, 0.0], [-1.2, 0.0]])
    labels = np.zeros(2, dtype=int)
    score = np.array([0.9, 0.8])
    # Greedy (devkit): the 0.9 box takes its nearest reference (1.0 m away), the 0.8 box is left
    # with one 2.7 m away, beyond 2 m.
    greedy = associate_frame(cand, labels, score, ref, labels, LabelQualityConfig())
    assert greedy.tolist() == [0, -1]
    # Hungarian: 1.2 + 0.5 m beats 1.0 + 2.7 m, and both are within 2 m.
    hungarian = associate_frame(
        cand, labels, score, ref, labels, LabelQualityConfig(method="hungarian")
    )
    assert hungarian.tolist() == [1, 0]
    # Lower score first: the other order.
    assert associate_frame(cand, labels, score[::-1], ref, labels).tolist() == [1, 0]


def test_association_is_class_wise_and_thresholded():
    cand = np.array([[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]])
    ref = np.array([[0.5, 0.0], [10.0, 2.5], [20.0, 1.9]])
    score = np.array([0.5, 0.6, 0.7])
    got = associate_frame(cand, np.array([0, 0, 1]), score, ref, np.array([1, 0, 1]))
    # Class 0 vs 1 never match; 2.5 m is too far; 1.9 m is close enough.
    assert got.tolist() == [-1, -1, 2]
    agnostic = LabelQualityConfig(class_wise=False)
    assert associate_frame(
        cand, np.array([0, 0, 1]), score, ref, np.array([1, 0, 1]), agnostic
    ).tolist() == [0, -1, 2]
    assert (
        associate_frame(cand[:0], np.zeros(0), np.zeros(0), ref, np.array([1, 0, 1])).tolist() == []
    )
    with pytest.raises(ValueError, match="method"):
        LabelQualityConfig(method="nearest")
    with pytest.raises(ValueError, match="match_distance_m"):
        LabelQualityConfig(match_distance_m=0.0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lq")
    time_s, tracks, _ = lane_tracks(n_objects=10, seed=1)
    reference = scene_from_tracks(time_s, tracks)
    ref_records = write_qa_run(root / "ref", reference)
    return root, time_s, tracks, ref_records


def test_detector_equal_to_ground_truth_scores_100_percent(runs, tmp_path):
    root, time_s, tracks, ref_records = runs
    # The same boxes under other track ids (a tracker numbers tracks its own way).
    renumbered = []
    for b in tracks:
        c = b[np.ones(len(b), dtype=bool)]
        c.track_id = 1000 - c.track_id
        renumbered.append(c)
    write_qa_run(tmp_path / "cand", scene_from_tracks(time_s, renumbered))
    r = evaluate_label_quality(root / "ref", tmp_path / "cand")
    o = r["overall"]
    assert o["candidate_questions"] == len(ref_records)
    # Every question agrees but the captions, which have no answer key.
    assert o["not_scored"] == sum(rec["category"] == "caption" for rec in ref_records)
    assert o["agree"] == o["candidate_questions"] - o["not_scored"]
    assert o["agreement"] == 1.0 and o["agreement_matched"] == 1.0
    assert o["unmatched"] == o["ambiguous"] == o["no_reference"] == o["disagree"] == 0
    assert o["missed"] == 0
    assert {
        t["agreement"] for t in r["by_type"].values() if t["candidate_questions"] - t["not_scored"]
    } == {1.0}
    assert (tmp_path / "cand" / "eval" / "label_quality.json").is_file()
    assert "agreement: 1.0000" in format_label_quality(r)


def test_missed_hallucinated_and_shifted_objects(runs, tmp_path):
    root, time_s, tracks, ref_records = runs
    removed, moved_far, moved_near = 0, 1, 2
    cand_tracks = []
    for b in tracks:
        c = b[b.track_id != removed]
        c.center_m = c.center_m.copy()
        c.center_m[c.track_id == moved_far, 0] += 5.0  # beyond the 2 m match distance
        c.center_m[c.track_id == moved_near, 0] += 1.5  # within it
        c.track_id = c.track_id + 100
        cand_tracks.append(c)
    cand_records = write_qa_run(tmp_path / "cand", scene_from_tracks(time_s, cand_tracks))
    r = evaluate_label_quality(root / "ref", tmp_path / "cand", out_path=False)
    o = r["overall"]

    def tracks_of(rec):
        return {reg["track_id"] for reg in rec["regions"]}

    # Every candidate question about the far-moved object has no ground-truth object (captions
    # are not scored; a count's truth is the reference's own set of objects).
    assert o["unmatched"] == sum(
        moved_far + 100 in tracks_of(rec)
        for rec in cand_records
        if rec["category"] not in ("caption", "counting")
    )
    assert o["unmatched_wrong_class"] <= o["unmatched"]
    # Every ground-truth question about the removed or far-moved object was missed.
    assert o["missed"] == sum(bool({removed, moved_far} & tracks_of(rec)) for rec in ref_records)
    assert o["reference_questions"] == len(ref_records)
    assert o["agreement"] < 1.0

    # The near-moved object is matched; its distance answers agree exactly when the candidate's
    # distance is within 25 % of the reference's distance of the same object at that keyframe.
    from autolabel.attributes import ObjectAttributes

    ref_attrs = ObjectAttributes.read_parquet(root / "ref" / "scene-t-0001" / "attributes.parquet")
    rows = {rec["id"]: rec for rec in cand_records}
    from autolabel.evaluation.label_quality import associate_tracks, reanswer_clip
    from autolabel.qa.templates import load_templates

    cand_attrs = ObjectAttributes.read_parquet(
        tmp_path / "cand" / "scene-t-0001" / "attributes.parquet"
    )
    frames = sorted({rec["keyframe"]["frame_index"] for rec in cand_records})
    assoc = associate_tracks(ref_attrs, cand_attrs, frames)
    statuses = {
        s["id"]: s["status"]
        for s in reanswer_clip(cand_records, ref_attrs, ref_records, assoc, load_templates())
    }
    checked = 0
    for qid, status in statuses.items():
        rec = rows[qid]
        if rec["type"] != "ego_distance" or tracks_of(rec) != {moved_near + 100}:
            continue
        kf = rec["keyframe"]["frame_index"]
        truth = ref_attrs.distance_m[ref_attrs.row_of(np.array([kf]), np.array([moved_near]))[0]]
        expected = abs(rec["answer_values"]["distance_m"] - truth) < 0.25 * truth
        assert status == ("agree" if expected else "disagree")
        checked += 1
    # Questions about untouched objects all agree (captions are not scored; counts depend on
    # objects other than their regions, the removed one among them).
    for qid, status in statuses.items():
        if rows[qid]["category"] in ("caption", "counting"):
            continue
        if not tracks_of(rows[qid]) & {moved_far + 100, moved_near + 100}:
            assert status == "agree", (qid, rows[qid]["type"])
    assert checked > 0


def _regions_doc(records, attrs):
    """``marks/regions.json`` as the pipeline writes it: every region of each QA keyframe, those
    seen only in other frames of its window listed with no camera at the keyframe."""
    import json as _json

    shown: dict[int, dict[int, list[str]]] = {}
    for rec in records:
        kf = rec["keyframe"]["frame_index"]
        for reg in rec["regions"]:
            shown.setdefault(kf, {})[reg["track_id"]] = reg["cameras_visible"]
    keyframes = []
    for kf, tracks in sorted(shown.items()):
        present = attrs.track_id[attrs.frame_index == kf]
        regions = [
            {"track_id": int(t), "cameras_at_keyframe": sorted(tracks.get(int(t), []))}
            for t in present
        ]
        keyframes.append({"frame_index": kf, "regions": regions})
    return _json.dumps({"keyframes": keyframes})


def test_run_against_a_copy_of_itself_agrees_fully_with_regions_not_visible_at_the_keyframe(
    runs, tmp_path
):
    import shutil

    from autolabel.attributes import ObjectAttributes

    root, _, _, ref_records = runs
    ref = tmp_path / "ref"
    shutil.copytree(root / "ref", ref)
    clip_dir = ref / "scene-t-0001"
    attrs = ObjectAttributes.read_parquet(clip_dir / "attributes.parquet")
    doc = _regions_doc(ref_records, attrs)
    # Some region of a keyframe with a count question is not shown by any camera there.
    assert '"cameras_at_keyframe": []' in doc
    (clip_dir / "marks").mkdir()
    (clip_dir / "marks" / "regions.json").write_text(doc)
    copy = tmp_path / "copy"
    shutil.copytree(ref, copy)
    r = evaluate_label_quality(ref, copy, out_path=False)
    assert r["by_type"]["cnt_visible"]["candidate_questions"] > 0
    assert r["by_type"]["cnt_visible"]["agreement"] == 1.0
    assert r["overall"]["agreement"] == 1.0 and r["overall"]["missed"] == 0


def test_runs_without_common_clips_are_an_error(runs, tmp_path):
    root, time_s, tracks, _ = runs
    write_qa_run(tmp_path / "other", scene_from_tracks(time_s, tracks, clip="scene-t-0099"))
    with pytest.raises(ValueError, match="no clip in common"):
        evaluate_label_quality(root / "ref", tmp_path / "other", out_path=False)
    with pytest.raises(FileNotFoundError, match="run folder not found"):
        evaluate_label_quality(root / "ref", tmp_path / "missing", out_path=False)
