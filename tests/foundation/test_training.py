"""A short real training run: the loss falls and the saved model reloads in sentence-transformers."""
import json

import numpy as np

from cselab.cli import main
from cselab.config import load_config
from cselab.train.loop import train
from tests.conftest import TINY_BERT


def _config(tmp_path, corpus, steps=20, **extra):
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={corpus}", "optim.batch_size=16",
                 "optim.lr=5e-4", "train.eval_steps=0", "train.save_steps=0", "train.log_steps=1",
                 "train.precision=fp32", f"train.output_dir={tmp_path / 'run'}", f"optim.max_steps={steps}"]
    overrides += [f"{k}={v}" for k, v in extra.items()]
    return load_config("simcse", overrides)


def _losses(run_dir):
    return [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_twenty_steps_lower_the_loss_and_reload_in_sentence_transformers(tmp_path, tiny_corpus):
    from sentence_transformers import SentenceTransformer

    import cselab

    summary = train(_config(tmp_path, tiny_corpus, **{"optim.epochs": 2}), progress=False)
    assert summary["finished"] and summary["steps"] == 20
    losses = _losses(tmp_path / "run")
    assert len(losses) == 20
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.1
    sentences = ["The cat sees a red ball.", "A child reads the letter at night.", "Completely unrelated words here"]
    ours = cselab.load(str(tmp_path / "run")).encode(sentences)
    theirs = SentenceTransformer(str(tmp_path / "run"), device="cpu").encode(sentences, convert_to_numpy=True)
    assert np.allclose(ours, theirs, atol=1e-5)


def test_hard_negatives_from_config_reach_the_loss(tmp_path, tiny_corpus, monkeypatch):
    """A negative view adds rows; the loss sees them (observed through the InfoNCE term)."""
    from cselab.augment.base import AUGMENTERS, Augmenter
    from cselab.losses.infonce import InfoNCELoss

    class Reverse(Augmenter):
        name = "test_reverse_words"
        tag = "altering"

        def augment(self, sentences, seed):
            return [" ".join(reversed(s.split())) for s in sentences]

    if "test_reverse_words" not in AUGMENTERS:
        AUGMENTERS.register("test_reverse_words", "reverse word order (test only)")(Reverse)
    seen = []
    original = InfoNCELoss.forward

    def spy(self, inputs):
        seen.append(None if inputs.negative is None else inputs.negative.shape[0])
        return original(self, inputs)

    monkeypatch.setattr(InfoNCELoss, "forward", spy)
    config = _config(tmp_path, tiny_corpus, steps=4,
                     **{"views.negative": "test_reverse_words", "views.negative_every": 2})
    train(config, progress=False)
    assert seen == [16, None, 16, None]


def test_cli_train_and_encode(tmp_path, tiny_corpus, capsys):
    out = tmp_path / "cli"
    code = main(["train", "--corpus", str(tiny_corpus), "--output-dir", str(out), "--max-steps", "3", "--seed", "1",
                 "--set", f"model.from_config={json.dumps(TINY_BERT)}", "--set", "optim.batch_size=8",
                 "--set", "train.eval_steps=0", "--set", "train.precision=fp32"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "3/3 steps" in printed and str(out) in printed
    inputs = tmp_path / "in.txt"
    inputs.write_text("one sentence\nanother sentence here\n")
    assert main(["encode", str(out), "--in", str(inputs), "--out", str(tmp_path / "emb.npy")]) == 0
    emb = np.load(tmp_path / "emb.npy", allow_pickle=False)
    assert emb.shape == (2, TINY_BERT["hidden_size"])


def test_cli_rejects_bad_keys_with_one_line(capsys):
    assert main(["train", "--set", "optim.lrr=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "optim.lrr" in err
