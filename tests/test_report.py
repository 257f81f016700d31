"""``autolabel report``: the page, its images and plots; rendered in headless Chromium if present."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import cv2
import numpy as np
import pytest
from qa_runs import small_scene, write_camera_images, write_qa_run

from autolabel.benchmark.export import export_benchmark
from autolabel.benchmark.scoring import score_baselines
from autolabel.evaluation.label_quality import evaluate_label_quality
from autolabel.report import write_report
from autolabel.report.html import _SCRIPT
from autolabel.report.plots import box_footprints
from autolabel.set_of_mark import region_colours_bgr

_VOID = {"img", "meta", "br", "hr", "input", "link"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []
        self.unbalanced: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.unbalanced.append(tag)
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def test_box_footprints_by_hand():
    # A 2 m wide, 4 m long box at (10, 5) facing +y (yaw 90 degrees).
    fp = box_footprints(
        np.array([10.0]), np.array([5.0]), np.array([np.pi / 2]), np.array([2.0]), np.array([4.0])
    )
    # Front-left: 2 m ahead (+y) and 1 m to its left (-x); front-right: 1 m to its right (+x).
    np.testing.assert_allclose(fp[0, 0], [9.0, 7.0], atol=1e-12)
    np.testing.assert_allclose(fp[0, 1], [11.0, 7.0], atol=1e-12)
    np.testing.assert_allclose(fp[0, 2], [11.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(fp[0, 4], fp[0, 0])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    scene = small_scene(seed=5, n_objects=8, clip="scene-r-0001")
    write_camera_images(root / "data", scene)
    records = write_qa_run(root / "run", scene, root / "data")
    write_qa_run(root / "ref", scene, root / "data")
    evaluate_label_quality(root / "ref", root / "run")
    export_benchmark(root / "run", root / "run" / "bench")
    score_baselines(root / "run" / "bench")
    page = write_report(root / "run")
    return root, records, page


def test_page_links_only_existing_images(report):
    root, records, page = report
    assert page == root / "run" / "report" / "index.html"
    parsed = _Page()
    parsed.feed(page.read_text())
    assert parsed.unbalanced == [] and parsed.stack == []
    assert parsed.images
    for src in parsed.images:
        path = page.parent / src
        assert path.is_file(), src
        assert cv2.imread(str(path)) is not None, src
    keyframes = {r["keyframe"]["frame_index"] for r in records}
    bev = [s for s in parsed.images if s.endswith("_bev.png")]
    som = [s for s in parsed.images if s.endswith("_som.png")]
    assert len(bev) == len(som) == len(keyframes)
    # Each Set-of-Mark view shows the marks of its keyframe's regions: every region a record
    # shows at that keyframe has pixels of its mark colour in the view.
    for src in som:
        kf = int(re.search(r"_k(\d+)_som\.png$", src).group(1))
        image = cv2.imread(str(page.parent / src))
        shown = {
            reg["region_id"]
            for r in records
            if r["keyframe"]["frame_index"] == kf
            for reg in r["regions"]
            if reg["cameras_visible"]
        }
        assert shown, src
        for rid in shown:
            assert np.all(image == region_colours_bgr(rid), axis=-1).sum() >= 20, (src, rid)


def test_page_shows_metrics_and_qa(report):
    root, records, page = report
    parsed = _Page()
    parsed.feed(page.read_text())
    text = " ".join(parsed.text)
    for heading in ("Label quality", "Benchmark scores", "QA (", "Clip scene-r-0001"):
        assert heading in text
    # Label quality of a run against itself, and the oracle's benchmark row, are 100 %.
    assert re.search(r"agreement \(unmatched count as wrong\)\s*100\.0 %", text)
    assert re.search(
        r"oracle\s+\d+\s+\d+\s+100\.0\s+100\.0\s+100\.0\s+100\.0\s+100\.0\s+100\.0", text
    )
    for rec in records[:20]:
        assert rec["question"] in text and rec["answer"] in text
    # No detection or tracking evaluation in this run: the page says how to get one.
    assert "autolabel eval det" in text and "autolabel eval track" in text


def test_report_is_deterministic(report, tmp_path):
    root, _, page = report
    again = write_report(root / "run", out_dir=tmp_path / "again")
    assert again.read_text() == page.read_text()
    for png in sorted((page.parent / "assets").glob("*.png")):
        assert (tmp_path / "again" / "assets" / png.name).read_bytes() == png.read_bytes(), png.name


def test_missing_run_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="run folder not found"):
        write_report(tmp_path / "nothing")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)


def _chromium(args, profile, timeout=180):
    return subprocess.run(
        [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)"
)
def test_page_renders_in_headless_chromium(report, tmp_path):
    _, _, page = report
    url = page.resolve().as_uri()
    dom = _chromium(["--dump-dom", url], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    title = re.search(r"<title>(.*?)</title>", dom.stdout, re.S).group(1)
    assert "load errors" not in title, title
    assert _console_lines(dom.stderr) == []
    shot = tmp_path / "shot.png"
    run = _chromium(
        ["--window-size=1280,2400", f"--screenshot={shot}", url], tmp_path / "profile-shot"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert _console_lines(run.stderr) == []
    img = cv2.imread(str(shot))
    assert img is not None and img.shape[:2] == (2400, 1280)
    # Not blank: a good share of the pixels is ink (neither the page's background nor the
    # sections' white), and the header bar is drawn in its dark blue.
    background = np.array([249, 247, 246])  # #f6f7f9 in BGR
    ink = (np.abs(img.astype(int) - background).sum(axis=2) > 30) & (img.min(axis=2) < 235)
    assert ink.mean() > 0.05
    np.testing.assert_allclose(img[5, 640], [58, 43, 29], atol=3)  # #1d2b3a in BGR
    cv2.imwrite(str(tmp_path / "ink.png"), (ink * 255).astype(np.uint8))


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)"
)
def test_chromium_check_catches_a_broken_image(tmp_path):
    # The same error hook as the report: a missing image must show in the title.
    page = tmp_path / "broken.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><title>t</title><script>{_SCRIPT}</script></head>"
        "<body><ul id='load-errors'></ul><img src='missing.png'>"
        "<script>console.error('logged')</script></body></html>"
    )
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path / "profile")
    title = re.search(r"<title>(.*?)</title>", dom.stdout, re.S).group(1)
    assert title.startswith("[1 load errors]")
    assert "missing.png" in dom.stdout.split("load-errors", 1)[1]
    assert any("logged" in line for line in _console_lines(dom.stderr))
