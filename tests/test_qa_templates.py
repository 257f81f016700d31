"""QA templates as data: the packaged set loads; malformed files fail naming file and key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from autolabel.qa.templates import (
    CATEGORIES,
    TemplateError,
    ValueSpec,
    format_value,
    load_templates,
    region_ids_in,
)
from qa_templates import TEMPLATE_DIR


def test_packaged_templates_cover_every_category_and_many_phrasings():
    ts = load_templates()
    cats = {qt.category for qt in ts.types.values()}
    assert cats == set(CATEGORIES)
    for qt in ts.types.values():
        assert len(qt.questions) >= 2, qt.id
        assert all(len(v) >= 1 for v in qt.answers.values()), qt.id
        assert sum(len(v) for v in qt.answers.values()) >= 2, qt.id
    st = [qt for qt in ts.types.values() if qt.category == "spatiotemporal"]
    assert {qt.group for qt in st} == {"st"} and all(qt.horizons == (0, 1, 2, 3) for qt in st)
    assert all(qt.explanations for qt in ts.types.values() if qt.choices)
    assert len(ts.sha256) == 64


def test_value_rounding_rules():
    assert format_value(ValueSpec("d", "m", 2), 17.9049) == "17.90"
    assert format_value(ValueSpec("b", "deg", 0, wrap=True), -0.4) == "0"  # no "-0"
    assert format_value(ValueSpec("b", "deg", 0, wrap=True), -179.7) == "180"  # (-180, 180]
    assert format_value(ValueSpec("b", "deg", 0, wrap=True), 179.4) == "179"
    assert region_ids_in("Region [3] is left of Region [12].") == [3, 12]


@pytest.fixture
def tdir(tmp_path: Path) -> Path:
    out = tmp_path / "templates"
    shutil.copytree(TEMPLATE_DIR, out, ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.md"))
    return out


def _edit(path: Path, fn) -> None:
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _fails(tdir: Path, *parts: str) -> str:
    with pytest.raises(TemplateError) as e:
        load_templates(tdir)
    msg = str(e.value)
    for p in parts:
        assert p in msg, msg
    return msg


def test_unchanged_copy_loads(tdir):
    assert set(load_templates(tdir).types) == set(load_templates().types)


def test_invalid_yaml(tdir):
    (tdir / "object_centric.yaml").write_text("category: object_centric\ntypes: [unclosed\n")
    _fails(tdir, "object_centric.yaml", "not valid YAML")


def test_unknown_placeholder(tdir):
    def fn(d):
        d["types"]["obj_distance"]["answers"][1] = "Region [{C}] is {distance_m} meters away."

    _edit(tdir / "object_centric.yaml", fn)
    _fails(tdir, "object_centric.yaml", "types.obj_distance.answers[1]", "unknown placeholder {C}")


def test_region_must_be_written_as_region_brackets(tdir):
    def fn(d):
        d["types"]["ego_distance"]["questions"][0] = "How far is object {A}?"

    _edit(tdir / "ego_centric.yaml", fn)
    _fails(tdir, "ego_centric.yaml", "types.ego_distance.questions[0]", "Region [{A}]")


def test_missing_outcome_answers(tdir):
    def fn(d):
        del d["types"]["obj_left_right"]["answers"]["right"]

    _edit(tdir / "object_centric.yaml", fn)
    _fails(tdir, "object_centric.yaml", "types.obj_left_right.answers.right", "missing")


def test_unquoted_yes_key_is_explained(tdir):
    path = tdir / "ego_centric.yaml"
    path.write_text(path.read_text().replace('"yes":', "yes:", 1))
    _fails(tdir, "ego_centric.yaml", "types.ego_side.answers", "quote the key")


def test_unit_must_match_name(tdir):
    def fn(d):
        d["types"]["ego_distance"]["values"]["distance_m"]["unit"] = "deg"

    _edit(tdir / "ego_centric.yaml", fn)
    _fails(tdir, "ego_centric.yaml", "types.ego_distance.values.distance_m.unit", "in m")


def test_value_the_quantity_does_not_give(tdir):
    def fn(d):
        d["types"]["ego_distance"]["values"]["speed_mps"] = {"unit": "m/s", "decimals": 1}

    _edit(tdir / "ego_centric.yaml", fn)
    _fails(tdir, "types.ego_distance.values.speed_mps", "does not give 'speed_mps'")


def test_unknown_quantity_key_and_param(tdir):
    def fn(d):
        d["types"]["obj_bigger"]["quantity"] = "pair_heavier"

    _edit(tdir / "object_centric.yaml", fn)
    _fails(tdir, "types.obj_bigger.quantity", "unknown quantity 'pair_heavier'")


def test_bad_param(tdir):
    def fn(d):
        d["types"]["obj_bigger"]["params"]["min_ratio"] = "large"

    _edit(tdir / "object_centric.yaml", fn)
    _fails(tdir, "types.obj_bigger.params.min_ratio", "expected float")


def test_bad_bins(tdir):
    def fn(d):
        d["types"]["mc_distance_bin"]["params"]["bins"][2]["max_m"] = 3

    _edit(tdir / "multiple_choice.yaml", fn)
    _fails(tdir, "multiple_choice.yaml", "types.mc_distance_bin.params.bins[2].max_m")


def test_unknown_type_key(tdir):
    def fn(d):
        d["types"]["obj_distance"]["phrasings"] = []

    _edit(tdir / "object_centric.yaml", fn)
    _fails(tdir, "types.obj_distance.phrasings", "unknown key")


def test_duplicate_type_id_across_files(tdir):
    data = yaml.safe_load((tdir / "object_centric.yaml").read_text())
    extra = {"category": "object_centric", "types": {"obj_distance": data["types"]["obj_distance"]}}
    (tdir / "zz_extra.yaml").write_text(yaml.safe_dump(extra))
    _fails(tdir, "zz_extra.yaml", "types.obj_distance", "duplicate type id")


def test_asks_must_be_an_outcome(tdir):
    def fn(d):
        d["types"]["obj_left_right"]["questions"][2]["asks"] = "above"

    _edit(tdir / "object_centric.yaml", fn)
    _fails(tdir, "types.obj_left_right.questions[2].asks", "above")


def test_spatiotemporal_needs_now_and_future_phrasings(tdir):
    def fn(d):
        qs = d["types"]["st_agent_speed"]["questions"]
        d["types"]["st_agent_speed"]["questions"] = [q for q in qs if q.get("when") != "now"]

    _edit(tdir / "spatiotemporal.yaml", fn)
    _fails(tdir, "types.st_agent_speed.questions", "no phrasing for now")


def test_multiple_choice_needs_choices_placeholder(tdir):
    def fn(d):
        d["types"]["mc_sector"]["questions"][0] = "Where is Region [{A}]?"

    _edit(tdir / "multiple_choice.yaml", fn)
    _fails(tdir, "types.mc_sector.questions[0]", "{choices}")


def test_vocabulary_must_name_every_camera(tdir):
    def fn(d):
        del d["cameras"]["CAM_BACK"]

    _edit(tdir / "vocabulary.yaml", fn)
    _fails(tdir, "vocabulary.yaml", "cameras.CAM_BACK", "missing")


def test_bad_category_and_missing_folder(tdir, tmp_path):
    def fn(d):
        d["category"] = "fun_facts"

    _edit(tdir / "multi_view.yaml", fn)
    _fails(tdir, "multi_view.yaml", "category", "fun_facts")
    with pytest.raises(TemplateError, match="not found"):
        load_templates(tmp_path / "nowhere")


def test_a_new_type_is_only_a_template(tdir):
    """Adding a question type over an existing quantity needs no code."""
    new = {
        "category": "ego_centric",
        "types": {
            "ego_distance_short": {
                "kind": "quantitative",
                "subjects": "region",
                "quantity": "region_distance",
                "values": {"distance_m": {"unit": "m", "decimals": 0}},
                "questions": ["Distance to Region [{A}]?", "How far is Region [{A}]?"],
                "answers": ["About {distance_m} m."],
            }
        },
    }
    (tdir / "extra.yaml").write_text(yaml.safe_dump(new))
    ts = load_templates(tdir)
    assert ts["ego_distance_short"].values[0].decimals == 0


def test_outcome_text_must_cover_every_outcome(tdir):
    def fn(d):
        d["types"]["ego_side"]["outcome_text"] = {"left": "to the left of"}

    _edit(tdir / "ego_centric.yaml", fn)
    _fails(tdir, "types.ego_side.outcome_text", "every outcome")
