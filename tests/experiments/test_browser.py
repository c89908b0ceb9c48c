"""The HTML report in a real browser: headless Chromium renders it; screenshot and DOM are checked."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cselab.experiments.report import write_report

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason="/usr/bin/chromium is not installed "
                                "(Debian package chromium; scripts/setup.sh installs it)")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          timeout=120, check=True)


def screenshot(tmp_path: Path, page: Path, height: int) -> np.ndarray:
    from PIL import Image

    target = tmp_path / f"shot-{height}.png"
    chromium(tmp_path, f"--screenshot={target}", f"--window-size=1200,{height}", page.as_uri())
    with Image.open(target) as image:
        assert image.format == "PNG" and image.size == (1200, height)
        return np.asarray(image.convert("RGB")).astype(int)


def share_near(pixels: np.ndarray, hex_colour: str, tolerance: int = 12) -> float:
    colour = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    return float((np.abs(pixels - colour).max(axis=-1) <= tolerance).mean())


def test_report_renders_with_tables_and_plots(fake_sweep, tmp_path):
    page = write_report([fake_sweep], tmp_path / "out")["html"]

    top = screenshot(tmp_path, page, 2000)
    non_white = (top < 245).any(axis=-1).mean()
    assert 0.03 < non_white < 0.9  # something is drawn, and it is not a blank or black page
    assert share_near(top, "#2b6cb0") > 0.002  # table header cells
    assert share_near(top, "#c6f6d5") > 0.0005  # best-in-column cells

    # The whole page (plots are further down): matplotlib's tab10 orange and green exist only in the plots.
    whole = screenshot(tmp_path, page, 5000)
    assert share_near(whole, "#ff7f0e", 20) > 0.0005 and share_near(whole, "#2ca02c", 20) > 0.0005

    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout.decode()
    # STS, transfer, alignment/uniformity and the training cost; paired tests for the first three.
    assert len(re.findall(r"<table class=\"results\"", dom)) == 4
    assert len(re.findall(r"<table class=\"tests\"", dom)) == 3
    figures = re.findall(r'<figure class="plot" id="plot-([a-z-]+)"><svg', dom)
    assert sorted(figures) == sorted(["stsb-dev-curves", "bars-sts", "bars-transfer", "align-uniform", "loss-curves"])
    assert "STS-B (dev)" in dom and "Paired tests against simcse" in dom
