"""Device and precision are chosen per machine: no bf16 on a CPU without native bf16, a probe where
it has it, a one-line error for a GPU that is not there."""
from __future__ import annotations

import json
import logging

import pytest
import torch

from cselab import hardware
from cselab.config import load_config
from cselab.errors import ConfigError


def test_auto_device_is_cpu_without_cuda_and_a_missing_gpu_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert hardware.resolve_device("auto") == torch.device("cpu")
    assert hardware.resolve_device("cpu") == torch.device("cpu")
    for name in ("cuda", "cuda:1"):
        with pytest.raises(ConfigError, match=r"^train.device: .*no CUDA GPU") as info:
            hardware.resolve_device(name, "train.device")
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="not one of auto, cpu, cuda, cuda:N"):
        hardware.resolve_device("tpu")


def test_asking_for_cuda_without_one_fails_before_any_work(monkeypatch, tmp_path):
    from cselab.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "run"
    assert main(["train", "--output-dir", str(out), "--set", "train.device=cuda"]) == 2
    assert not out.exists()


def test_cpu_without_native_bf16_never_gets_bf16(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    monkeypatch.setattr(hardware, "probe_cpu_matmuls", lambda *a, **k: pytest.fail("no probe without native bf16"))
    choice = hardware.choose_precision("auto", torch.device("cpu"))
    assert choice.precision == "fp32" and "no native bf16" in choice.reason


@pytest.mark.parametrize(("bf16", "fp32", "expected"), [(0.5, 0.3, "bf16"), (0.2, 0.35, "fp32")])
def test_cpu_with_native_bf16_takes_the_faster_in_the_probe(monkeypatch, bf16, fp32, expected):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(hardware, "probe_cpu_matmuls", lambda *a, **k: {"bf16_tflops": bf16, "fp32_tflops": fp32})
    choice = hardware.choose_precision("auto", torch.device("cpu"))
    assert choice.precision == expected and choice.probe == {"bf16_tflops": bf16, "fp32_tflops": fp32}


def test_forcing_bf16_on_a_cpu_without_it_warns(monkeypatch, caplog):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))
    with caplog.at_level(logging.WARNING, logger="cselab.hardware"):
        choice = hardware.choose_precision("bf16", torch.device("cpu"))
    assert choice.precision == "bf16" and "many times slower" in caplog.text


def test_the_probe_measures_both_precisions_once_and_is_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path))
    first = hardware.probe_cpu_matmuls(16, rows=32, seconds=0.01)
    assert first["bf16_tflops"] > 0 and first["fp32_tflops"] > 0
    cache = json.loads((tmp_path / "precision-probe.json").read_text())
    assert list(cache.values()) == [first]
    monkeypatch.setattr(torch, "randn", lambda *a, **k: pytest.fail("a cached probe is not measured again"))
    assert hardware.probe_cpu_matmuls(16, rows=32, seconds=0.01) == first


def test_the_default_recipe_asks_for_auto_and_the_summary_names_the_choice(tmp_path, tiny_corpus, monkeypatch):
    from cselab.train.loop import train
    from tests.conftest import TINY_BERT

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))
    config = load_config("simcse", [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}",
                                    "optim.batch_size=8", "optim.max_steps=2", "train.eval_steps=0",
                                    f"train.output_dir={tmp_path / 'run'}"])
    assert config.train.precision == "auto" and config.model.unpad == "auto" and config.train.device == "auto"
    summary = train(config, progress=False)
    assert summary["precision"]["precision"] == "fp32" and summary["precision"]["requested"] == "auto"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["precision"] == summary["precision"]
