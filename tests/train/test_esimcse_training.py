"""The esimcse recipe trains offline (a tiny BERT, and the local MiniLM), keeps its momentum encoder and
queue as two checkpointed components, updates the momentum encoder from the parameters that compute
the step's loss, and is listed and set up by the command line (`cselab recipes`, `--paper-setting`)."""
from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from cselab import cli
from cselab.config import load_config
from cselab.train import checkpoint as ckpt
from cselab.train.loop import train
from tests.conftest import TINY_BERT

MOMENTUM = "momentum_keys.momentum_encoder"
QUEUE = "momentum_keys.queue"


def tiny(corpus, out, *extra: str) -> list[str]:
    return [f"model.from_config={json.dumps(TINY_BERT)}", "model.name_or_path=minilm", f"data.corpus={corpus}",
            "optim.batch_size=8", "train.eval_steps=0", "train.log_steps=1", "train.precision=fp32",
            f"train.output_dir={out}", *extra]


def records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def checkpoint_states(out, step: int) -> dict:
    return ckpt.read_checkpoint(out / "checkpoints" / f"step-{step:08d}").states


def test_three_steps_offline_with_the_momentum_encoder_and_queue_in_the_checkpoint(tiny_corpus, tmp_path):
    out = tmp_path / "run"
    summary = train(load_config("esimcse", tiny(tiny_corpus, out, "optim.max_steps=3", "train.save_steps=3")),
                    progress=False)
    assert summary["finished"] and summary["steps"] == 3
    assert all(math.isfinite(r["esimcse.loss"]) for r in records(out))
    saved = ckpt.read_checkpoint(out / "checkpoints" / "step-00000003")
    assert saved.versions[MOMENTUM] == 1 and saved.versions[QUEUE] == 1
    model = load_file(str(out / "model.safetensors"))
    momentum = saved.states[MOMENTUM]["weights"]
    assert momentum.keys() == saved.states["encoder"].keys()  # a whole copy of the backbone
    assert not any(torch.equal(momentum[k], saved.states["encoder"][k]) for k in momentum if k.endswith("query.weight"))
    # Three steps of 8 sentences, newest last; the key width is the encoder's.
    assert saved.states[QUEUE]["keys"].shape == (24, TINY_BERT["hidden_size"])
    # Neither trained nor saved with the model: not among the heads' weights, not in the model file.
    assert not any("momentum" in name for name in saved.states["heads"]["tensors"])
    assert not any("momentum" in name for name in model)


def test_the_momentum_update_uses_the_parameters_that_compute_the_step(tiny_corpus, tmp_path):
    """models.py:161-163: theta_m <- lambda theta_m + (1 - lambda) theta_t with theta_t the parameters before
    step t's optimiser update (those that computed its loss). With lambda 0.5 and checkpoints after steps 1
    and 2: m_2 = (m_1 + theta_1) / 2, theta_1 being the encoder after step 1; not (m_1 + theta_2) / 2."""
    out = tmp_path / "run"
    objective = "objective=[{name: esimcse, temperature: 0.05, momentum: 0.5, queue_size: 160}]"
    train(load_config("esimcse", tiny(tiny_corpus, out, objective, "optim.max_steps=2", "optim.lr=1e-3",
                                      "train.save_steps=1", "train.keep_checkpoints=2")), progress=False)
    first, second = checkpoint_states(out, 1), checkpoint_states(out, 2)
    m1, m2 = first[MOMENTUM]["weights"], second[MOMENTUM]["weights"]
    theta1, theta2 = first["encoder"], second["encoder"]
    moved = [k for k in m1 if not torch.equal(theta1[k], theta2[k])]
    assert moved
    for k in m1:
        assert torch.allclose(m2[k], (m1[k] + theta1[k]) / 2, atol=1e-7)
    assert any(not torch.allclose(m2[k], (m1[k] + theta2[k]) / 2, atol=1e-7) for k in moved)


def test_gradcache_steps_train_as_plain_steps(tiny_corpus, tmp_path):
    """The pass runs once per step whatever the strategy (its update and queue are not replayed per chunk).
    Without dropout: a GradCache chunk is trimmed to its own longest row, so its dropout masks differ."""
    losses = {}
    no_dropout = {**TINY_BERT, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    for name, extra in (("plain", []), ("gradcache", ["optim.grad_cache_chunk=4"])):
        out = tmp_path / name
        train(load_config("esimcse", tiny(tiny_corpus, out, "optim.max_steps=4", "train.save_steps=0",
                                          f"model.from_config={json.dumps(no_dropout)}", *extra)), progress=False)
        losses[name] = [r["loss"] for r in records(out)]
    assert losses["gradcache"] == pytest.approx(losses["plain"], rel=1e-5)


def test_a_local_pretrained_model_trains(tiny_corpus, tmp_path):
    """The offline MiniLM (a sentence-transformers directory): its own pooler, the same pass."""
    out = tmp_path / "run"
    config = load_config("esimcse", [f"data.corpus={tiny_corpus}", "optim.batch_size=4", "optim.max_steps=2",
                                     "train.eval_steps=0", "train.save_steps=0", "train.log_steps=1",
                                     "train.precision=fp32", f"train.output_dir={out}"])
    summary = train(config, progress=False)
    assert summary["finished"] and all(math.isfinite(r["esimcse.loss"]) for r in records(out))


def test_cselab_recipes_lists_esimcse(capsys):
    assert cli.main(["recipes"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("esimcse "))
    assert "ESimCSE" in line


def test_the_paper_setting_applies_to_esimcse(offline_home, senteval_dir, monkeypatch, capsys):
    """`--paper-setting` switches model, corpus and dev data; the recipe's own keys stay."""
    from tests.evaluate.test_paper_setting import cache_fake_model

    cache_fake_model(offline_home / "hf-hub")
    corpus = offline_home / "wiki.txt"
    corpus.write_text("one sentence\nanother sentence\n")
    monkeypatch.setenv("CSELAB_WIKI1M", str(corpus))
    monkeypatch.setenv("CSELAB_DATA", str(senteval_dir))
    assert cli.main(["train", "--recipe", "esimcse", "--paper-setting", "--print-config"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["model"]["name_or_path"] == "bert-base-uncased" and config["data"]["corpus"] == str(corpus)
    assert config["objective"] == [{"name": "esimcse", "temperature": 0.05, "momentum": 0.995, "queue_size": 160}]
    assert config["views"]["positive_params"] == {"dup_rate": 0.32, "unit": "subword", "count": "paper"}
    assert (config["optim"]["batch_size"], config["optim"]["lr"], config["model"]["max_seq_len"]) == (64, 3e-5, 32)
