"""One precision rule for encoding (issue 39, item 7): `cselab encode` and `cselab.load(DIR).encode` give the
same vectors by default, fp32, even on a CPU where bf16 is native and faster; half precision is asked for."""
from __future__ import annotations

import numpy as np

import cselab
from cselab.cli import main
from cselab.hardware import PrecisionChoice


def bf16_machine(monkeypatch):
    """A CPU where precision auto resolves to bf16 (this one may not be)."""
    import cselab.model.encoder as encoder_module

    monkeypatch.setattr(encoder_module, "choose_precision",
                        lambda requested, device, hidden_size=384: PrecisionChoice("bf16", requested, "test"))


def test_cselab_encode_and_load_encode_give_identical_vectors(monkeypatch, tiny_encoder, tmp_path):
    bf16_machine(monkeypatch)
    model = tiny_encoder.save(tmp_path / "model")
    sentences = [f"sentence number {i} says something {'long ' * (i % 7)}." for i in range(40)]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n")
    assert main(["encode", str(model), "--in", str(tmp_path / "in.txt"), "--out", str(tmp_path / "cli.npy")]) == 0
    from_cli = np.load(tmp_path / "cli.npy")
    from_python = cselab.load(str(model)).encode(sentences)
    assert from_cli.dtype == np.float32 and np.array_equal(from_cli, from_python)


def test_half_precision_is_asked_for(monkeypatch, tiny_encoder, tmp_path):
    bf16_machine(monkeypatch)
    model = tiny_encoder.save(tmp_path / "model")
    sentences = [f"another sentence {i} with a few more words in it" for i in range(20)]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n")
    assert main(["encode", str(model), "--in", str(tmp_path / "in.txt"), "--out", str(tmp_path / "auto.npy"),
                 "--precision", "auto"]) == 0
    fp32 = cselab.load(str(model)).encode(sentences)
    half = np.load(tmp_path / "auto.npy")
    assert not np.array_equal(half, fp32) and np.allclose(half, fp32, atol=0.1)
