"""AugCSE's second selection metric: ``train.select_on: [stsb_dev, transfer_dev]`` keeps the best model
by the transfer tasks' dev accuracy in OUTPUT_DIR/best-transfer_dev/, beside the STS-B-best final model.

Tiny random BERTs on a generated SentEval directory (never lines of ../shared)."""
from __future__ import annotations

import json
import logging
import shutil

import pytest

from cselab.config import ConfigError, load_config
from cselab.evaluate.dev import TransferDev
from cselab.evaluate.formats import MissingDataError
from cselab.model.encoder import SentenceEncoder
from cselab.run_files import BEST_MODEL
from cselab.train import checkpoint as ckpt
from cselab.train.loop import train
from cselab.train.selection import ModelSelection, Tracked
from tests.evaluate.senteval_files import make_senteval
from tests.reliability.conftest import (
    CRASHED,
    Crash,
    assert_same_metrics,
    assert_same_weights,
    edit_checkpoint_state,
    load_config_for,
    metric_records,
    model_weights,
)

BOTH = "train.select_on=[stsb_dev, transfer_dev]"
KEPT = "best-transfer_dev"


@pytest.fixture
def senteval(tmp_path):
    return make_senteval(tmp_path / "senteval", per_class=16)


def config_for(corpus, out_dir, senteval, **extra):
    settings = {"train.eval_steps": 2, "train.save_steps": 4, "data.dev_dir": str(senteval),
                "train.select_on": "[stsb_dev, transfer_dev]", **extra}
    return load_config_for(corpus, out_dir, **settings)


def test_both_best_models_are_kept_with_their_markers(tmp_path, tiny_corpus, senteval):
    out = tmp_path / "run"
    summary = train(config_for(tiny_corpus, out, senteval), progress=False)
    evaluated = [r for r in metric_records(out) if "transfer_dev" in r]
    assert [r["step"] for r in evaluated] == [2, 4, 6, 8, 10, 12]
    for record in evaluated:  # the mean of the two tasks' dev accuracies, each logged too
        assert record["transfer_dev"] == pytest.approx((record["sst2_dev"] + record["mrpc_dev"]) / 2)
    best = max(evaluated, key=lambda r: (r["transfer_dev"], -r["step"]))  # the first of the best
    marker = json.loads((out / KEPT / BEST_MODEL).read_text())
    assert marker == {"step": best["step"], "transfer_dev": best["transfer_dev"], "tasks": ["SST2", "MRPC"]}
    sts = json.loads((out / BEST_MODEL).read_text())
    assert sts["step"] == summary["best_step"] and sts["stsb_dev"] == summary["best_stsb_dev"]
    assert summary["select_on"] == ["stsb_dev", "transfer_dev"] and summary["selected_by"] == "stsb_dev"
    assert summary["best_transfer_dev"] == marker["transfer_dev"]
    assert summary["best_transfer_dev_step"] == marker["step"]
    assert summary["transfer_dev_model"] == str(out / KEPT) and summary["transfer_dev_note"] is None
    # The directory is a model of its own; scored again, it gives the value that selected it.
    loaded = SentenceEncoder.from_pretrained(str(out / KEPT))
    again = TransferDev(senteval).scores(lambda s: loaded.encode(s, batch_size=128))
    assert again["transfer_dev"] == pytest.approx(marker["transfer_dev"], abs=1e-6)
    from cselab.cli import format_summary

    assert f"transfer dev    {marker['transfer_dev']:.2f} (best, step {marker['step']}; SST2 + MRPC)" \
           in format_summary(summary)


# transfer_dev by evaluation step (scores patched in): the best between two checkpoints (steps 4 and 8).
AFTER_A_CHECKPOINTED_BEST = {2: 50.0, 4: 55.0, 6: 70.0, 8: 60.0, 10: 65.0, 12: 68.0}
AFTER_AN_OLDER_BEST = {2: 50.0, 4: 40.0, 6: 70.0, 8: 60.0, 10: 65.0, 12: 68.0}


@pytest.fixture
def scripted_transfer(monkeypatch):
    """transfer_dev follows a table of values by step, so the test knows where the best models are."""
    def use(table):
        step = {}
        evaluate = ModelSelection.evaluate

        def evaluate_at(self, at):
            step["now"] = at
            return evaluate(self, at)

        monkeypatch.setattr(ModelSelection, "evaluate", evaluate_at)
        monkeypatch.setattr(TransferDev, "scores", lambda self, encode: {"transfer_dev": table[step["now"]]})
    return use


@pytest.mark.parametrize("table,mode", [(AFTER_A_CHECKPOINTED_BEST, "after_save"),
                                        (AFTER_A_CHECKPOINTED_BEST, "during_save"),
                                        (AFTER_AN_OLDER_BEST, "during_save")])
def test_resume_keeps_the_transfer_best_model_exact(tmp_path, tiny_corpus, senteval, scripted_transfer, monkeypatch,
                                                    caplog, table, mode):
    """A crash after (or in the middle of) the save at step 6, between the checkpoints of steps 4 and
    8: the resumed run's markers, models and metrics are the uninterrupted run's."""
    scripted_transfer(table)
    reference = tmp_path / "reference"
    expected = train(config_for(tiny_corpus, reference, senteval), progress=False)
    assert json.loads((reference / KEPT / BEST_MODEL).read_text())["step"] == 6
    out = tmp_path / "run"
    original = Tracked.save

    def crashing_save(self, write_model):
        if self.step == 6 and not self.primary:
            if mode == "during_save":
                (self.directory / BEST_MODEL).unlink(missing_ok=True)
                (self.directory / "model.safetensors").write_bytes(b"partial")
                raise Crash(f"{CRASHED}: killed while writing the transfer-best model")
            original(self, write_model)
            raise Crash(f"{CRASHED}: killed right after writing the transfer-best model")
        original(self, write_model)

    monkeypatch.setattr(Tracked, "save", crashing_save)
    with pytest.raises(Exception, match=CRASHED):
        train(config_for(tiny_corpus, out, senteval), progress=False)
    monkeypatch.setattr(Tracked, "save", original)
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(out / "checkpoints")] == [4]
    with caplog.at_level(logging.WARNING, logger="cselab.train.selection"):
        summary = train(config_for(tiny_corpus, out, senteval), progress=False)
    # An older best (step 2) cannot be rewritten from the step-4 checkpoint: the replay rewrites it.
    replayed = any("being written when the run stopped" in r.getMessage() for r in caplog.records)
    assert replayed == (table is AFTER_AN_OLDER_BEST)
    for directory in (KEPT, "."):
        assert (json.loads((out / directory / BEST_MODEL).read_text())
                == json.loads((reference / directory / BEST_MODEL).read_text()))
        assert_same_weights(model_weights(out / directory), model_weights(reference / directory))
    assert_same_metrics(metric_records(out), metric_records(reference))
    for key in ("best_transfer_dev", "best_transfer_dev_step", "best_step", "best_stsb_dev"):
        assert summary[key] == expected[key]
    state = ckpt.read_state(ckpt.list_checkpoints(out / "checkpoints")[-1])["components"]["selection"]
    assert state["best"]["transfer_dev"] == [70.0, 6]


def test_missing_sst2_fails_before_the_first_step_in_one_line(tmp_path, tiny_corpus, senteval):
    (senteval / "SST" / "binary" / "sentiment-dev").unlink()
    out = tmp_path / "run"
    with pytest.raises(MissingDataError) as info:
        train(config_for(tiny_corpus, out, senteval), progress=False)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(senteval / "SST" / "binary" / "sentiment-dev"))
    assert "train.select_on=[stsb_dev]" in message
    assert not out.exists()  # a run that fails before its first checkpoint leaves nothing behind


def test_missing_mrpc_averages_sst2_alone_and_says_so(tmp_path, tiny_corpus, senteval, capsys):
    shutil.rmtree(senteval / "MRPC")
    out = tmp_path / "run"
    summary = train(config_for(tiny_corpus, out, senteval, **{"optim.max_steps": 4}), progress=False)
    assert "msr_paraphrase_train.txt not found" in capsys.readouterr().out
    assert summary["transfer_dev_tasks"] == ["SST2"] and "SST-2 only" in summary["transfer_dev_note"]
    records = [r for r in metric_records(out) if "transfer_dev" in r]
    assert records and all(r["transfer_dev"] == r["sst2_dev"] and "mrpc_dev" not in r for r in records)
    assert json.loads((out / KEPT / BEST_MODEL).read_text())["tasks"] == ["SST2"]


def test_without_senteval_data_the_selection_is_off_with_a_warning_and_the_summary_says_so(
        tmp_path, tiny_corpus, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CSELAB_DATA", raising=False)
    out = tmp_path / "run"
    summary = train(load_config_for(tiny_corpus, out, **{"train.eval_steps": 4,
                                                          "train.select_on": "[stsb_dev, transfer_dev]"}),
                    progress=False)
    assert "warning: train.select_on transfer_dev: not evaluated: no SentEval data found" in capsys.readouterr().out
    assert summary["selected_by"] == "last_step" and summary["best_transfer_dev"] is None
    assert summary["transfer_dev_model"] is None and "no SentEval data" in summary["transfer_dev_note"]
    assert not (out / KEPT).exists()


def test_starting_over_forgets_an_earlier_transfer_best_model(tmp_path, tiny_corpus, senteval):
    """The earlier run's best-transfer_dev/ goes whole, model files too: `cselab eval OUT/best-transfer_dev`
    must not load an old run's model when the new run writes none."""
    out = tmp_path / "run"
    (out / KEPT).mkdir(parents=True)
    (out / KEPT / BEST_MODEL).write_text(json.dumps({"step": 99, "transfer_dev": 100.0, "tasks": []}))
    (out / KEPT / "model.safetensors").write_bytes(b"an earlier run's weights")
    (out / KEPT / "config.json").write_text("{}")
    # No evaluation in the new run: nothing would overwrite the old model.
    summary = train(config_for(tiny_corpus, out, senteval, **{"optim.max_steps": 2, "train.eval_steps": 0}),
                    resume=False, progress=False)
    assert not (out / KEPT).exists()
    assert summary["best_transfer_dev"] is None and "train.eval_steps is 0" in summary["transfer_dev_note"]


def test_a_checkpoint_from_before_select_on_resumes(tmp_path, tiny_corpus):
    """A checkpoint whose saved config lacks train.select_on (made before the setting existed) counts it as
    the default, [stsb_dev]: the run resumes instead of reporting a changed setting."""
    out = tmp_path / "run"
    config = load_config_for(tiny_corpus, out, **{"optim.max_steps": 6})
    train(config, progress=False)
    checkpoints = ckpt.list_checkpoints(out / "checkpoints")
    assert [ckpt.checkpoint_step(p) for p in checkpoints] == [3, 6]
    shutil.rmtree(checkpoints[-1])
    edit_checkpoint_state(checkpoints[0], lambda state: state["config"]["train"].pop("select_on"))
    assert ckpt.config_differences(ckpt.read_state(checkpoints[0])["config"], config.to_dict()) == []
    assert train(config, progress=False)["finished"]
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(out / "checkpoints")] == [3, 6]
    # Where the current setting is not the default, the missing key still differs.
    edit_checkpoint_state(ckpt.list_checkpoints(out / "checkpoints")[-1],
                          lambda state: state["config"]["train"].pop("select_on"))
    with pytest.raises(ConfigError, match="different train.select_on"):
        train(load_config_for(tiny_corpus, out, **{"optim.max_steps": 6, "train.select_on": BOTH.split("=")[1]}),
              progress=False)


@pytest.mark.parametrize("value,wrong", [("[stsb_dev, transfer]", "train.select_on[1]: unknown metric 'transfer'"),
                                         ("[stsb_dev, transfer_dev, transfer_dev]", "name each metric once"),
                                         ("[sts:a/dev.tsv, sts:b/dev.tsv]", "name each metric once"),
                                         ("[sts]", "train.select_on[0]: unknown metric 'sts'"),
                                         ("[val_mlm_loss]", "unknown metric 'val_mlm_loss'"),
                                         ("[stsb_dev:x]", "unknown metric 'stsb_dev:x'"),
                                         ("[]", "expected a non-empty list"),
                                         ("stsb_dev", "train.select_on: expected a list")])
def test_select_on_names_known_metrics(value, wrong):
    with pytest.raises(ConfigError, match=wrong.replace("[", r"\[")):
        load_config("simcse", [f"train.select_on={value}"])


def test_augcse_recipes_select_on_both_metrics():
    assert load_config("simcse").train.select_on == ["stsb_dev"]
    for recipe in ("augcse", "augcse-4", "augcse-8", "augcse-16"):
        assert load_config(recipe, [BOTH]).train.select_on == load_config(recipe).train.select_on
        assert load_config(recipe).train.select_on == ["stsb_dev", "transfer_dev"]
