"""GPU code paths that a CPU can check: fp32 master weights from a half-precision checkpoint, bf16
only on cards with native bf16, the vendor-peak table, a bounded peak probe, fp16 loss-scale
collapse reported."""
from __future__ import annotations

import logging
import time

import pytest
import torch

from cselab import hardware
from cselab.errors import TrainingError
from cselab.train import throughput
from tests.conftest import TINY_BERT


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_checkpoint_loads_as_fp32_master_weights(dtype, tmp_path):
    from cselab.model.encoder import SentenceEncoder

    stored = SentenceEncoder.from_config(TINY_BERT, "minilm")
    stored.backbone.to(dtype).save_pretrained(tmp_path / "half", safe_serialization=True)
    stored.tokenizer.save_pretrained(tmp_path / "half")
    encoder = SentenceEncoder.from_pretrained(str(tmp_path / "half"))
    assert {p.dtype for p in encoder.parameters()} == {torch.float32}
    # The fp16 recipe's path: autocast, a scaled backward, then unscale_, which refuses fp16 gradients.
    scaler = torch.amp.GradScaler("cpu")
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=1e-3)
    features = encoder.tokenize(["a cat sat on the mat", "dogs run"])
    with torch.autocast("cpu", dtype=torch.float16):
        loss = encoder(features).pow(2).mean()
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # "Attempting to unscale FP16 gradients" with fp16 master weights
    scaler.step(optimizer)
    scaler.update()


@pytest.mark.parametrize("capability, emulated, expected", [((7, 0), True, "fp16"), ((7, 5), True, "fp16"),
                                                             ((8, 0), True, "bf16"), ((9, 0), True, "bf16")])
def test_precision_auto_on_cuda_is_bf16_only_with_native_bf16(capability, emulated, expected, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: emulated)  # V100/T4: emulated
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a test card")
    choice = hardware.choose_precision("auto", torch.device("cuda"))
    assert choice.precision == expected, choice


@pytest.mark.parametrize("name, half", [("NVIDIA L40", 181.0), ("NVIDIA L40S", 362.1), ("NVIDIA L4", 121.0),
                                        ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 80GB HBM3", 989.4),
                                        ("NVIDIA A10G", 70.0), ("NVIDIA A10", 125.0), ("NVIDIA A100-SXM4-80GB", 312.0),
                                        ("NVIDIA GH200 480GB", 989.4), ("Tesla T4", 65.0)])
def test_the_peak_table_matches_whole_names_and_the_longest_one(name, half):
    assert throughput.gpu_peak_flops(torch.bfloat16, name) == pytest.approx(half * 1e12)


def test_an_unknown_card_has_no_vendor_peak():
    assert throughput.gpu_peak_flops(torch.bfloat16, "NVIDIA L400 Future") is None


def test_the_peak_probe_times_finished_work_and_stays_within_its_budget(monkeypatch):
    """A GPU-like device: matmuls return at once and the wait comes at the synchronisation, 30 ms per
    queued matmul. The probe waits for each matmul, so it never queues more than a window's work."""
    queued, cost = [0], 0.03
    real_matmul = throughput._matmul

    def launch(a, b, device):
        real_matmul(a[:2, :2], b[:2, :2], "cpu")  # next to nothing: the cost is paid at the wait
        queued[0] += 1
        time.sleep(cost * queued[0])  # the wait: every matmul queued so far
        queued[0] = 0

    monkeypatch.setattr(throughput, "_matmul", launch)
    start = time.perf_counter()
    peak = throughput.matmul_peak_flops(torch.float32, seconds=0.2, size=1024, windows=4)
    assert time.perf_counter() - start < 2.0
    assert peak > 0


def _step_with_a_scaler(scale: float):
    from cselab.train.optimizer import OptimizerStep

    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    return OptimizerStep(optimizer, scheduler, [weight], 1.0, scaler), weight


def overflowing_step(update, weight):
    update.scale(torch.ones(()))  # the scaler's scale is made by the first scale() of a run
    weight.grad = torch.full_like(weight, float("inf"))
    update()


def test_a_collapsing_fp16_loss_scale_warns_once_then_stops_the_run(caplog):
    update, weight = _step_with_a_scaler(4.0)
    for _ in range(3):  # every step overflows: the scale halves each time (4 -> 0.5)
        overflowing_step(update, weight)
    with caplog.at_level(logging.WARNING, logger="cselab.train"):
        for _ in range(3):
            update.check_loss_scale(3)
    assert len([r for r in caplog.records if "loss scale fell to 0.5 by step 3" in r.getMessage()]) == 1
    for _ in range(20):
        overflowing_step(update, weight)
    with pytest.raises(TrainingError, match=r"^train.precision fp16: the loss scale fell to .* by step 23") as info:
        update.check_loss_scale(23)
    assert "\n" not in str(info.value)


def test_a_healthy_loss_scale_says_nothing(caplog):
    update, weight = _step_with_a_scaler(2.0 ** 16)
    update.scale(torch.ones(()))
    weight.grad = torch.ones_like(weight)
    update()
    with caplog.at_level(logging.WARNING):
        update.check_loss_scale(1)
    assert not caplog.records


@pytest.mark.parametrize("unpad", ["auto", "true", "false"])
def test_compile_compiles_the_forward_that_runs(unpad, tiny_corpus, monkeypatch):
    """With train.compile the unpadded forward stays on and its layers are what is compiled
    (speed/compiled.py); a model run padded is compiled whole. Either way a training step's forward
    runs through dynamo. The eager backend stands in for inductor (the frames dynamo captures are the
    same; inductor's C++ build would take minutes here)."""
    import json

    import torch._dynamo

    from cselab.config import load_config
    from cselab.model.encoder import SentenceEncoder
    from cselab.speed import compiled, speed_up

    compile_module = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile",
                        lambda self, **kwargs: compile_module(self, **{**kwargs, "backend": "eager"}))
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    config = load_config("simcse", [f"model.from_config={json.dumps(TINY_BERT)}", f"model.unpad={unpad}",
                                    "train.compile=true", f"data.corpus={tiny_corpus}"])
    encoder = SentenceEncoder.from_config(TINY_BERT, "minilm")
    speed_up(encoder, config.train, config.model, torch.device("cpu"))
    assert encoder.unpadded == (unpad != "false")
    assert (encoder.compiled_layers is not None) == encoder.unpadded
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    encoder.train()
    features = encoder.tokenize(["a cat sat on the mat", "dogs run"])
    encoder(features, real_tokens=int(features["attention_mask"].sum())).sum().backward()  # as a training step
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    torch._dynamo.reset()
