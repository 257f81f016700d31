"""Which kerb a log's traffic keeps to, from where the log was driven (nuScenes ``log.location``).

The refine stage points parked cars the way the traffic of their side of the street goes
(``RefineConfig.traffic_side``); on a log driven on the other side that turns the far kerb's
cars round. nuScenes mixes both: Boston keeps right, Singapore keeps left. With
``traffic_side: auto`` (the default) the side comes from the log's location where it names a
place below; elsewhere the run keeps right, the side of most of the world's roads, and says so
in its refine counts (``traffic_side_from_location`` 0).
"""

from __future__ import annotations

import re

#: Places of public driving datasets' logs (nuScenes, nuPlan, Argoverse, Waymo, Lyft, PandaSet,
#: KITTI, ONCE, ZOD) and of countries that drive on the left, as words of a location string.
_LEFT_HAND = (
    "singapore", "sg-one-north", "london", "united-kingdom", "uk", "japan", "tokyo", "osaka",
    "hong-kong", "hongkong", "australia", "sydney", "melbourne", "new-zealand", "india", "mumbai",
    "bangalore", "thailand", "bangkok", "malaysia", "kuala-lumpur", "indonesia", "jakarta",
    "ireland", "dublin", "south-africa",
)  # fmt: skip
_RIGHT_HAND = (
    "boston", "pittsburgh", "las-vegas", "san-francisco", "miami", "austin", "palo-alto",
    "phoenix", "mountain-view", "los-angeles", "detroit", "washington", "seattle", "new-york",
    "karlsruhe", "munich", "berlin", "germany", "paris", "france", "shanghai", "beijing",
    "china", "sweden", "stockholm", "gothenburg", "usa",
)  # fmt: skip


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _names(location_words: list[str], place: str) -> bool:
    """Whether the place's words stand, in order and next to each other, in the location's."""
    words = _words(place)
    n = len(words)
    return any(location_words[i : i + n] == words for i in range(len(location_words) - n + 1))


def side_of_location(location: str) -> str | None:
    """ "left" or "right" for a location string naming a place of ``_LEFT_HAND`` / ``_RIGHT_HAND``
    (``"singapore-onenorth"``: left, ``"boston-seaport"``: right; case, ``_`` and spaces do not
    matter); None for one that names none, or both."""
    words = _words(location)
    left = any(_names(words, p) for p in _LEFT_HAND)
    right = any(_names(words, p) for p in _RIGHT_HAND)
    if left == right:
        return None
    return "left" if left else "right"


def resolved_traffic_side(setting: str, location: str) -> tuple[str, bool]:
    """The side ``traffic_heading`` takes ("right", "left" or "none") for a ``traffic_side``
    setting, and whether it came from the log's location. "auto" takes the location's side
    (``side_of_location``) and "right" where the location names no known place; any other
    setting is taken as it is."""
    if setting != "auto":
        return setting, False
    side = side_of_location(location)
    return (side, True) if side is not None else ("right", False)


__all__ = ["resolved_traffic_side", "side_of_location"]
