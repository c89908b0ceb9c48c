"""Model directories that cannot be used give one line, exit 2: pickled weights only (with the
conversion command), a name that is neither local nor reachable, a folder that is no model, corrupt
safetensors."""
from __future__ import annotations

import pytest


def test_a_model_with_pickled_weights_only_is_a_one_line_error_with_the_conversion(tmp_path, capsys):
    from cselab.cli import main

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "bert"}')
    (model / "pytorch_model.bin").write_bytes(b"not loaded")
    inputs = tmp_path / "in.txt"
    inputs.write_text("a sentence\n")
    assert main(["encode", str(model), "--in", str(inputs), "--out", str(tmp_path / "e.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pytorch_model.bin" in err and "safe_serialization=True" in err


@pytest.mark.parametrize("kind", ["missing", "not_a_model", "corrupt"])
def test_a_model_that_cannot_load_is_a_one_line_error(tmp_path, capsys, monkeypatch, kind):
    from cselab.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = tmp_path / "model"
    if kind == "not_a_model":
        model.mkdir()
        (model / "notes.txt").write_text("just a folder")
    elif kind == "corrupt":
        model.mkdir()
        (model / "config.json").write_text('{"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1, '
                                           '"num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10}')
        (model / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage")
    name = str(model) if kind != "missing" else "no-such-org/no-such-model"
    inputs = tmp_path / "in.txt"
    inputs.write_text("a sentence\n")
    assert main(["encode", name, "--in", str(inputs), "--out", str(tmp_path / "e.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot load a model" in err and "Traceback" not in err
