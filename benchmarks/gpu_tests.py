"""The CUDA-marked tests (``pytest -m cuda``), run once and written as benchmark results: each test's
outcome and time, so that a GPU run's evidence sits in benchmarks/results/ beside its figures.

    python benchmarks/gpu_tests.py            # exit status: pytest's

Without a CUDA GPU the tests skip themselves (with the reason) and the results say so.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def outcome(case: ET.Element) -> tuple[str, str]:
    for kind in ("failure", "error", "skipped"):
        found = case.find(kind)
        if found is not None:
            return kind, (found.get("message") or "").splitlines()[0][:200] if found.get("message") else ""
    return "passed", ""


def main() -> int:
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    with tempfile.TemporaryDirectory() as work:
        report = Path(work) / "junit.xml"
        # The files that hold cuda-marked tests (collecting the whole suite would import every extra).
        files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                       if "mark.cuda" in p.read_text(encoding="utf-8"))
        done = subprocess.run([sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider",
                               f"--junitxml={report}", *files], cwd=ROOT)
        cases = list(ET.parse(report).getroot().iter("testcase")) if report.is_file() else []
    rows = [[f"{c.get('classname', '').rsplit('.', 1)[-1]}::{c.get('name')}", *outcome(c),
             round(float(c.get("time", 0)), 2)] for c in cases]
    counts = {kind: sum(1 for r in rows if r[1] == kind) for kind in ("passed", "failure", "error", "skipped")}
    notes = (f"Device: {device or 'no CUDA GPU on this machine: the tests skipped themselves'}. pytest exit "
             f"status {done.returncode}; {counts}. Command: python benchmarks/gpu_tests.py")
    headers = ["test", "outcome", "message", "seconds"]
    write_results("gpu_tests", {"device": device, "exit_status": done.returncode, "counts": counts,
                                "tests": [dict(zip(headers, r, strict=True)) for r in rows]},
                  "CUDA tests (pytest -m cuda)", headers, rows, notes)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
