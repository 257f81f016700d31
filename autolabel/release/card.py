"""The dataset card: ``README.md`` with the Hugging Face YAML header (licence, task categories,
size category, configs with their Parquet files, features and split sizes) and a description of
what is in the release, how it was made and anonymized, and how to load it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

#: Parquet columns and their Hugging Face feature types, in column order.
FEATURES: tuple[tuple[str, Any], ...] = (
    ("id", "string"),
    ("group_id", "string"),
    ("clip_id", "string"),
    ("keyframe_time_s", "float64"),
    ("context_offsets_s", {"list": "float64"}),
    ("category", "string"),
    ("kind", "string"),
    ("type", "string"),
    ("template_id", "string"),
    ("question", "string"),
    ("answer", "string"),
    ("explanation", "string"),
    ("cameras", {"list": "string"}),
    ("images", {"list": "image"}),
    ("image_ids", {"list": "string"}),
    ("image_cameras", {"list": "string"}),
    ("image_time_offsets_s", {"list": "float64"}),
    ("answer_values", "string"),
    ("choices", "string"),
    ("regions", "string"),
    ("params", "string"),
    ("confidence", "float64"),
)

_FIELD_DOCS = {
    "id": "record id (salted hash; stable within this release)",
    "group_id": "shared by the questions of one spatiotemporal group (one region, t = 0..3 s)",
    "clip_id": "the clip (20 s drive segment) the record comes from (salted hash)",
    "keyframe_time_s": "time of the question's keyframe from the clip's first keyframe, seconds",
    "context_offsets_s": "context frames' times relative to the keyframe, seconds",
    "category": "object_centric, ego_centric, spatiotemporal, multiple_choice, multi_view, "
    "appearance, action, counting, temporal, caption",
    "kind": "qualitative or quantitative (how answers are scored)",
    "type": "question type (see the template schema)",
    "template_id": "the template the text came from",
    "question": "question text; objects are named `Region [X]` as marked in the images",
    "answer": "answer text",
    "explanation": "multiple-choice explanation, else null",
    "cameras": "cameras the question is posed over",
    "images": "anonymized camera images with Set-of-Mark marks, embedded (PNG or JPEG)",
    "image_ids": "ids of the images (file names under images/<split>/)",
    "image_cameras": "camera of each image",
    "image_time_offsets_s": "time of each image relative to the keyframe, seconds",
    "answer_values": "structured answer, JSON (units in key names: _m, _deg, _mps)",
    "confidence": "how sure the answer is, 0..1: the weakest of its objects' evidence (track, "
    "detection score, LiDAR returns, mask, class stability, velocity) and its margin to the "
    "nearest decision boundary; only questions at or above the run's min_confidence are here",
    "choices": "multiple-choice options, JSON, else null",
    "regions": "regions in role order, JSON: region id, class, per image view the box "
    "[u_min, v_min, u_max, v_max] in pixels and a COCO RLE mask",
    "params": "template parameters (horizon_s, asked cameras), JSON",
}


def _feature_yaml(kind: Any) -> dict[str, Any]:
    if isinstance(kind, dict):
        return {"list": kind["list"]}
    return {"dtype": kind}


def size_category(n: int) -> str:
    """The Hub's size bucket of ``n`` examples."""
    for limit, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    ):
        if n < limit:
            return name
    return "n>10M"


def card_header(
    pretty_name: str,
    license_id: str,
    splits: Mapping[str, Mapping[str, Any]],
    shard_files: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """The YAML header as a mapping (``splits``: per split ``records``, ``num_bytes``)."""
    total = sum(int(s["records"]) for s in splits.values())
    return {
        "license": license_id,
        "pretty_name": pretty_name,
        "language": ["en"],
        "task_categories": ["visual-question-answering", "image-text-to-text"],
        "tags": ["autonomous-driving", "spatial-reasoning", "spatiotemporal", "set-of-mark"],
        "size_categories": [size_category(total)],
        "configs": [
            {
                "config_name": "default",
                "default": True,
                "data_files": [
                    {"split": split, "path": f"data/{split}-*.parquet"}
                    for split in sorted(shard_files)
                ],
            }
        ],
        "dataset_info": {
            "features": [{"name": n, **_feature_yaml(k)} for n, k in FEATURES],
            "splits": [
                {
                    "name": split,
                    "num_bytes": int(splits[split]["num_bytes"]),
                    "num_examples": int(splits[split]["records"]),
                }
                for split in sorted(shard_files)
            ],
        },
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def render_card(
    header: Mapping[str, Any],
    stats: Mapping[str, Any],
    config_summary: Mapping[str, Any],
    conversation_files: Sequence[str],
    webdataset_files: Sequence[str],
) -> str:
    """README.md text: YAML header, then the description."""
    yaml_text = yaml.safe_dump(dict(header), sort_keys=False, allow_unicode=True, width=100)
    splits = stats["splits"]
    anon = stats["anonymization"]
    split_rows = [
        [s, splits[s]["records"], splits[s]["clips"], splits[s]["images"]] for s in sorted(splits)
    ]
    categories = sorted({c for s in splits.values() for c in s["categories"]})
    cat_rows = [
        [c, *[splits[s]["categories"].get(c, 0) for s in sorted(splits)]] for c in categories
    ]
    classes = sorted({c for s in splits.values() for c in s["region_classes"]})
    cls_rows = [
        [c, *[splits[s]["region_classes"].get(c, 0) for s in sorted(splits)]] for c in classes
    ]
    fields = _table(["column", "content"], [[f"`{n}`", _FIELD_DOCS[n]] for n, _ in FEATURES])
    conv = "\n".join(f"- `{p}`" for p in conversation_files) or "- (none)"
    wds = (
        "\n".join(f"- `{p}`" for p in webdataset_files)
        if webdataset_files
        else "- (not written; `--webdataset` adds it)"
    )
    body = f"""# {header["pretty_name"]}

Spatial and spatiotemporal question-answer pairs about driving scenes, grounded in Set-of-Mark
region ids ("Region [X]") drawn on anonymized camera images. Generated automatically by
`autolabel` from 3D boxes, tracks and per-object attributes; every answer is re-derivable from
the structured `answer_values` and `regions` fields.

## Loading

```python
import datasets
ds = datasets.load_dataset("parquet", data_files={{"train": "data/train-*.parquet"}})
# or, from this folder (reads the configs above): datasets.load_dataset("path/to/this/folder")
```

Images are embedded in the Parquet files (`images`, a list of images per record) and also stored
once under `images/<split>/`, which the conversation exports reference.

## Splits

Split by drive log: no log contributes to two splits.

{_table(["split", "records", "clips", "images"], split_rows)}

## Fields

{fields}

## Statistics

{_table(["category", *sorted(splits)], cat_rows)}

Regions per class:

{_table(["class", *sorted(splits)], cls_rows)}

`stats/stats.json` holds counts per question type and camera and histograms of the distances
and speeds in the answers; `stats/*.png` plots them.

## Conversation exports

One `<image>` placeholder per image, in image order, each on a line naming the camera and the
frame's time relative to the keyframe, then the question:

{conv}

## WebDataset

{wds}

## Anonymization

Every image was anonymized before the marks were drawn: licence plates and heads, not whole
vehicles. Each plate is covered by a plate-sized patch on the front and rear face of every
vehicle's 3D box that looks toward the camera, centred on the vehicle, spanning the heights where
plates are mounted and grown by the box's position, heading and timing uncertainty; each head by
the top of every pedestrian's and rider's box; both projected into the image as polygons and
blurred with a feathered edge. Boxes came from
{anon.get("box_sources", "the run's boxes")}; {anon.get("learned", "")}
Blurred: {anon.get("blurred_area_fraction", 0.0):.4f} of all image area over
{anon.get("images", 0)} camera images ({anon.get("regions", {})} regions).

Metadata: no timestamps, GPS or global poses, dataset tokens, log or scene names, or EXIF; ids are
salted hashes; times are relative to the clip's first keyframe. A leak scanner checked every file
of this release before it was written.

## Build

{_table(["setting", "value"], [[k, f"`{v}`"] for k, v in config_summary.items()])}

`checksums.sha256` lists the SHA-256 of every file (`sha256sum -c checksums.sha256`). The same
run and settings rebuild this release byte for byte.

## Licence

{header["license"]}; the images derive from the source driving dataset and are subject to its
terms.
"""
    return f"---\n{yaml_text}---\n\n{body}"
