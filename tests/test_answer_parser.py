"""The benchmark's answer parser: units, signs, wrap-around, region ids, letters, relations."""

from __future__ import annotations

import pytest

from autolabel.benchmark.answer_parser import AnswerSpec, number_mentions, parse_answer, wrap_deg

ABCD = ("A", "B", "C", "D")


def parse(text, kind, **kw):
    return parse_answer(text, AnswerSpec(kind=kind, **kw))


@pytest.mark.parametrize(
    ("text", "metres"),
    [
        ("Region [0] is 20.12 meters away.", 20.12),
        ("It is 20.12m away", 20.12),
        ("about 2012 cm", 20.12),
        ("roughly 66 ft", 66 * 0.3048),
        ("66 feet apart", 66 * 0.3048),
        ("0.02 km", 20.0),
        ("1,200 meters", 1200.0),
        ("a 15-meter gap", 15.0),
        ("between 5-10 meters", 7.5),
        ("5 to 10 metres", 7.5),
        ("The distance is 12.5", 12.5),  # a bare number fills the one asked quantity
        ("Region [12] is 5 meters away", 5.0),  # the region id is not a distance
        ("In 3 seconds, Region [2] is 6.5 m away", 6.5),  # neither is the time
    ],
)
def test_distances_read_in_metres(text, metres):
    assert parse(text, "distance")["distance_m"] == pytest.approx(metres)


@pytest.mark.parametrize(
    "text",
    [
        "It moves at 5 m/s",  # a speed is never a distance
        "It moves at 5 m / s",
        "Region [3] is at 3 o'clock",  # a clock position is never a distance
        "Region [3]",  # a region id is never a distance
        "After 2 seconds.",  # a time is never a distance
        "",
        "   ",
        None,
        "It is -5 meters away",  # negative distances are not distances
    ],
)
def test_distance_traps_give_nothing(text):
    assert parse(text, "distance") == {}


@pytest.mark.parametrize(
    ("text", "mps"),
    [
        ("11.77 m/s", 11.77),
        ("11.77 m / s", 11.77),
        ("11.77 meters per second", 11.77),
        ("36 km/h", 10.0),
        ("36 kph", 10.0),
        ("36 kilometers per hour", 10.0),
        ("10 mph", 4.4704),
        ("Ego speed after 2 seconds is 11.77 m/s.", 11.77),
        ("The ego vehicle is stationary.", 0.0),
        ("It is moving at 7", 7.0),
    ],
)
def test_speeds_read_in_mps(text, mps):
    assert parse(text, "speed")["speed_mps"] == pytest.approx(mps)
    assert parse(text, "ego_speed")["ego_speed_mps"] == pytest.approx(mps)


def test_a_length_is_not_a_speed():
    assert parse("It is 20 meters away", "speed") == {}


@pytest.mark.parametrize(
    ("text", "degrees"),
    [
        ("-24 degrees", -24.0),
        ("at -24°", -24.0),
        ("\u221224\u00b0", -24.0),  # Unicode minus
        ("minus 24 degrees", -24.0),
        ("24 degrees to the right", -24.0),  # bearings grow to the left
        ("24 degrees left", 24.0),
        ("turned right by 30 degrees", -30.0),
        ("-24 degrees to the right", -24.0),  # an explicit sign wins
        ("336 degrees", -24.0),  # wrap-around
        ("-190 degrees", 170.0),
        ("540 degrees", 180.0),
        ("-180 degrees", 180.0),  # (-180, 180]
        ("0.5 rad", 28.64788975654116),
        ("The bearing is 15", 15.0),
    ],
)
def test_bearings_with_signs_and_wrap(text, degrees):
    assert parse(text, "bearing")["bearing_deg"] == pytest.approx(degrees)
    assert parse(text, "heading")["heading_deg"] == pytest.approx(degrees)


def test_wrap_deg_range():
    assert wrap_deg(180.0) == 180.0
    assert wrap_deg(-180.0) == 180.0
    assert wrap_deg(359.0) == pytest.approx(-1.0)
    assert wrap_deg(-361.0) == pytest.approx(-1.0)


def test_a_clock_position_is_not_a_bearing():
    assert parse("Region [2] is at 2 o'clock", "bearing") == {}


@pytest.mark.parametrize(
    ("text", "distance", "bearing"),
    [
        ("In 1 second they are 23.54 meters at -24 degrees.", 23.54, -24.0),
        ("In 3 seconds, Region [2] will be 6.5 meters away at -25 degrees", 6.5, -25.0),
        (
            "The ego vehicle and Region [2] are 9.15 meters apart, in the 157 degree direction.",
            9.15,
            157.0,
        ),
        ("23.5, -24", 23.5, -24.0),
        ("About 20 m at 336 degrees", 20.0, -24.0),
        (
            "After 2 seconds, the distance is about 40.31 meters, with the direction of 61 degrees.",
            40.31,
            61.0,
        ),
    ],
)
def test_positions(text, distance, bearing):
    got = parse(text, "position")
    assert got["distance_m"] == pytest.approx(distance)
    assert got["bearing_deg"] == pytest.approx(bearing)


@pytest.mark.parametrize(
    ("text", "hour"),
    [
        ("Region [2] is roughly at 12 o'clock from the ego vehicle.", 12),
        ("Region [3] is at 2 o'clock", 2),  # never the 3 of Region [3]
        ("It is around 3 o\u2019clock.", 3),
        ("three o'clock", 3),
        ("At 11 oclock", 11),
    ],
)
def test_clock_positions(text, hour):
    assert parse(text, "clock") == {"clock": hour}


@pytest.mark.parametrize(
    "text", ["Region [3]", "13 o'clock", "0 o'clock", "2.5 o'clock", "at 60 degrees"]
)
def test_clock_traps(text):
    assert parse(text, "clock") == {}


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("(B)", "B"),
        ("(b)", "B"),
        ("B) 5 to 10 meters", "B"),
        ("B. It is the nearest.", "B"),
        ("Answer: B", "B"),
        ("answer: b", "B"),
        ("The answer is (C): Region [0] is to the front right of the ego vehicle.", "C"),
        ("The answer is D.", "D"),
        ("Option C", "C"),
        ("C", "C"),
        ("(A) less than 5 meters", "A"),
    ],
)
def test_option_letters(text, letter):
    assert parse(text, "choice", letters=ABCD) == {"choice": letter}


@pytest.mark.parametrize(
    "text",
    [
        "A car is the nearest.",  # the article is not option A
        "The answer is a car.",
        "Region [3]",  # region 3 is not option C (and names no option here)
        "(E)",  # not an option of this question
        "",
    ],
)
def test_letter_traps(text):
    assert parse(text, "choice", letters=ABCD) == {}


def test_option_from_its_text_or_regions():
    texts = ("less than 5 meters", "5 to 10 meters", "10 to 20 meters", "20 to 30 meters")
    assert parse("It is 5 to 10 meters away.", "choice", letters=ABCD, choice_texts=texts) == {
        "choice": "B"
    }
    regions = ((6,), (5,), (3,), (2,))
    assert parse("Region [3] is nearest.", "choice", letters=ABCD, choice_region_ids=regions) == {
        "choice": "C"
    }
    orders = ((2, 5, 3), (5, 2, 3), (2, 3, 5), (3, 2, 5))
    assert parse(
        "Region [5], Region [2], Region [3].", "choice", letters=ABCD, choice_region_ids=orders
    ) == {"choice": "B"}


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Yes.", "yes"),
        ("Yes, it is.", "yes"),
        ("No.", "no"),
        ("no, only one view shows it", "no"),
        ("Correct.", "yes"),
    ],
)
def test_yes_no(text, answer):
    assert parse(text, "yes_no") == {"yes_no": answer}


def test_yes_no_from_the_stated_relation():
    # "Is Region [5] behind Region [6]?" answered without yes or no.
    spec = dict(region_ids=(6, 5), subject=5, reference=6, asks="behind", asks_kind="front_behind")
    assert parse("Region [5] is in front of Region [6].", "yes_no", **spec) == {"yes_no": "no"}
    assert parse("Region [5] is not behind Region [6].", "yes_no", **spec) == {"yes_no": "no"}
    assert parse("Region [5] is behind it.", "yes_no", **spec) == {"yes_no": "yes"}
    # "Is Region [6] taller than Region [2]?" answered with the taller region.
    spec = dict(region_ids=(6, 2), asks=6, asks_kind="region")
    assert parse("Region [2] is taller.", "yes_no", **spec) == {"yes_no": "no"}
    assert parse("Region [2] is shorter than Region [6].", "yes_no", **spec) == {"yes_no": "yes"}


@pytest.mark.parametrize(
    ("text", "side"),
    [
        ("Region [5] is to the left of Region [6].", "left"),
        ("It is on the right side of Region [6].", "right"),
        ("Region [6] is to the left of Region [5].", "right"),  # said of the reference: inverted
        ("Region [5] is not to the left of Region [6].", "right"),  # negated
        ("Left.", "left"),
    ],
)
def test_side_of_a_pair(text, side):
    # "Where is Region [5] (B) relative to Region [6] (A)?"
    spec = dict(region_ids=(6, 5), subject=5, reference=6)
    assert parse(text, "side", **spec) == {"outcome": side}


@pytest.mark.parametrize(
    ("text", "side"),
    [
        ("The ego vehicle is to the left of Region [1].", "left"),
        ("Region [1] is to the right of the ego vehicle.", "left"),
        ("Region [1] is on our left.", "right"),
    ],
)
def test_side_of_the_ego(text, side):
    spec = dict(region_ids=(1,), subject="ego", reference=1)
    assert parse(text, "side", **spec) == {"outcome": side}


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("The ego vehicle is bigger than Region [1].", "bigger"),
        ("Region [1] is larger than the ego vehicle.", "smaller"),
        ("The ego vehicle is the larger of the two.", "bigger"),
        ("Smaller.", "smaller"),
    ],
)
def test_ego_size(text, outcome):
    spec = dict(region_ids=(1,), subject="ego", reference=1)
    assert parse(text, "size", **spec) == {"outcome": outcome}


@pytest.mark.parametrize(
    ("text", "front_behind"),
    [
        ("Region [5] is in front of Region [6].", "front"),
        ("It is ahead of Region [6].", "front"),
        ("Region [5] is behind Region [6].", "behind"),
        ("Region [6] is behind Region [5].", "front"),
    ],
)
def test_front_behind(text, front_behind):
    spec = dict(region_ids=(6, 5), subject=5, reference=6)
    assert parse(text, "front_behind", **spec) == {"outcome": front_behind}


@pytest.mark.parametrize(
    ("text", "region"),
    [
        ("Region [6] is the larger one.", 6),
        ("Region [2] is bigger than Region [6].", 2),
        ("Region [2] is smaller than Region [6].", 6),
        ("Region [2] is shorter.", 6),
        ("Region [6] is nearer, at 5.68 meters versus 7.31 meters.", 6),
        ("region 2", 2),
    ],
)
def test_which_region(text, region):
    assert parse(text, "region", region_ids=(6, 2)) == {"region_id": region}


@pytest.mark.parametrize(
    ("text", "cameras"),
    [
        ("Region [3] is seen in the back camera.", ["CAM_BACK"]),
        (
            "Region [1] appears in more than one view: the front-left camera and the front camera.",
            ["CAM_FRONT", "CAM_FRONT_LEFT"],
        ),
        ("CAM_BACK_RIGHT", ["CAM_BACK_RIGHT"]),
        ("the rear left camera", ["CAM_BACK_LEFT"]),
        ("It is in front of us, in the front right camera.", ["CAM_FRONT_RIGHT"]),
    ],
)
def test_cameras(text, cameras):
    assert parse(text, "cameras") == {"cameras": cameras}


def test_number_mentions_kinds():
    kinds = [
        (m.kind, round(m.value, 3))
        for m in number_mentions("In 2 s, 10 m at 30 deg, 5 m/s, Region [4], 3 o'clock, 50 %")
    ]
    assert kinds == [
        ("time", 2.0),
        ("length", 10.0),
        ("angle", 30.0),
        ("speed", 5.0),
        ("clock", 3.0),
        ("percent", 50.0),
    ]


def test_spec_round_trip():
    spec = AnswerSpec(
        kind="choice",
        letters=ABCD,
        choice_texts=("a", "b", "c", "d"),
        choice_region_ids=((1,), (2,), (3,), (4,)),
    )
    assert AnswerSpec.from_dict(spec.as_dict()) == spec
    with pytest.raises(ValueError, match="kind"):
        AnswerSpec(kind="colour")
    with pytest.raises(ValueError, match="letters"):
        AnswerSpec(kind="choice")
