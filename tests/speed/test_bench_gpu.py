"""benchmarks/bench_gpu.py's host side, without a GPU: its options, the table it writes, and rows
written as "not measured" (GPU figures only ever come from a GPU)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_gpu_under_test", BENCHMARKS / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import _common

    monkeypatch.setattr(_common, "RESULTS", tmp_path)  # never benchmarks/results
    return module


def test_every_shape_and_path_is_a_not_measured_row_without_a_gpu(bench, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    bench.main(["--name", "speed"])
    text = (tmp_path / "speed.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "not measured: no CUDA GPU" in line]
    assert len(rows) == 3 * 5  # three shapes x (sentence-transformers + four cselab paths)
    for shape, batch in (("minilm-64", 64), ("bert-base-64", 64), ("bert-base-512", 512)):
        assert f"| {shape} | {batch} | sentence-transformers | not measured" in text
        for path in ("unpadded-compiled", "unpadded-eager", "padded-eager", "padded-compiled"):
            assert f"| {shape} | {batch} | cselab {path} | not measured" in text
    assert "Command: python benchmarks/bench_gpu.py --name speed" in text
    assert "no CUDA GPU on this machine: nothing was measured" in text


def test_rows_give_the_speed_up_over_the_peer_of_their_shape(bench):
    results = {("bert-base-64", "sentence-transformers"): {"precision": "bf16", "sentences_per_second": 1000.0},
               ("bert-base-64", "unpadded-compiled"): {"precision": "bf16", "sentences_per_second": 2500.0,
                                                       "mfu": 0.31, "warmup_seconds": 61.0},
               ("bert-base-64", "padded-eager"): "failed: worker exit 1: CUDA out of memory"}
    rows = bench.table(results, ["bert-base-64"], ["unpadded-compiled", "padded-eager", "padded-compiled"])
    assert rows[0][:6] == ["bert-base-64", 64, "sentence-transformers", "bf16", 1000.0, "-"]
    assert rows[1][2:] == ["cselab unpadded-compiled", "bf16", 2500.0, 2.5, 0.31, "-", 61.0, "-"]
    assert rows[2][3] == "failed: worker exit 1: CUDA out of memory" and rows[2][4:] == ["-"] * 6
    assert rows[3][3] == "not measured: not asked"


@pytest.mark.parametrize("argv, message", [(["--shapes", "bert-large"], "--shapes: unknown bert-large"),
                                           (["--paths", "padded"], "--paths: unknown padded"),
                                           (["--stsb", "minilm"], "--shapes: unknown minilm"),
                                           (["--steps", "25"], "--steps: a multiple of 10")])
def test_bad_options_are_refused_with_the_option_named(bench, argv, message, capsys):
    with pytest.raises(SystemExit):
        bench.parse(argv)
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_the_benchmark_runs_end_to_end_on_the_cpu(bench, tmp_path, shared_data):
    """--check-on-cpu: the workers' code (cselab's training and sentence-transformers' trainer, the
    metrics read back, the rows) with a tiny model on the CPU, so a broken benchmark is found here."""
    bench.main(["--check-on-cpu", "--name", "check", "--shapes", "minilm-64", "--paths", "padded-eager",
                "--steps", "10"])
    text = (tmp_path / "check.md").read_text()
    assert "no GPU figure" in text and "not measured" not in text and "failed" not in text, text
    row = next(line for line in text.splitlines() if "cselab padded-eager" in line).split(" | ")
    assert float(row[4]) > 0 and float(row[5]) > 0  # sentences/s and the ratio to the peer's


@pytest.mark.slow
def test_what_would_run_past_the_deadline_is_written_as_out_of_time(bench, tmp_path, shared_data):
    """The peer's worker is stopped at the deadline (its rows: out of time); the cselab worker, which
    would start after it, is not started."""
    bench.main(["--check-on-cpu", "--name", "late", "--shapes", "minilm-64", "--paths", "padded-eager",
                "--steps", "10", "--deadline", "2"])
    text = (tmp_path / "late.md").read_text()
    assert text.count("not measured: out of time (--deadline)") == 2, text
