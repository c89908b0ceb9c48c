"""Resume in-process: crashes at any step, corrupt checkpoints, changed settings, the best model."""
from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from cselab.config import ConfigError
from cselab.run_files import BEST_MODEL
from cselab.train import checkpoint as ckpt
from cselab.train.loop import train
from cselab.train.selection import Tracked
from tests.reliability.conftest import (
    CRASHED,
    STEPS,
    Crash,
    assert_same_metrics,
    assert_same_weights,
    load_config_for,
    metric_records,
    model_weights,
)


@pytest.mark.parametrize("crash_step,resume_workers", [(5, 0), (7, 2)])
def test_crash_then_resume_equals_uninterrupted(tmp_path, corpus_file, reference_run, crash_at, monkeypatch,
                                                crash_step, resume_workers):
    """Also with data-loader workers on resume: views are seeded by (seed, step), not by worker."""
    out_dir = tmp_path / "run"
    crash_at(crash_step)
    with pytest.raises(Exception, match=CRASHED):
        train(load_config_for(corpus_file, out_dir), progress=False)
    assert max(r["step"] for r in metric_records(out_dir)) == crash_step - 1
    monkeypatch.undo()
    summary = train(load_config_for(corpus_file, out_dir, **{"train.num_workers": resume_workers}), progress=False)
    assert summary["finished"] and summary["steps"] == STEPS
    assert_same_weights(model_weights(out_dir), model_weights(reference_run))
    assert_same_metrics(metric_records(out_dir), metric_records(reference_run))
    # wall_seconds covers both invocations: the crashed one's time to its last checkpoint counts too.
    crashed_state = ckpt.read_state(ckpt.list_checkpoints(out_dir / "checkpoints")[0])
    crashed_part = crashed_state["components"]["clock"]["wall_seconds"]
    assert crashed_part > 0 and summary["wall_seconds"] > crashed_part
    # first/final loss come from the checkpointed state, so the summary matches too.
    reference = json.loads((reference_run / "summary.json").read_text())
    assert summary["first_loss"] == pytest.approx(reference["first_loss"], abs=1e-6)
    assert summary["final_loss"] == pytest.approx(reference["final_loss"], abs=1e-5)


def test_rerunning_a_finished_run_redoes_nothing(tmp_path, corpus_file, reference_run):
    out_dir = tmp_path / "run"
    shutil.copytree(reference_run, out_dir)
    config = load_config_for(corpus_file, out_dir)
    before = (out_dir / "model.safetensors").stat().st_mtime_ns
    summary_before = (out_dir / "summary.json").read_bytes()
    summary = train(config, progress=False)
    assert summary["finished"] and (out_dir / "model.safetensors").stat().st_mtime_ns == before
    # The summary, wall_seconds included, is the one written when the run finished.
    assert (out_dir / "summary.json").read_bytes() == summary_before
    assert summary == json.loads(summary_before)
    assert_same_metrics(metric_records(out_dir), metric_records(reference_run))


@pytest.mark.parametrize("damage", ["truncate_model", "random_bytes_state", "no_manifest", "delete_optimizer"])
def test_corrupt_newest_checkpoint_is_set_aside_and_the_previous_used(tmp_path, corpus_file, reference_run, caplog,
                                                                     damage):
    out_dir = tmp_path / "run"
    shutil.copytree(reference_run, out_dir)
    newest = ckpt.list_checkpoints(out_dir / "checkpoints")[-1]
    assert ckpt.checkpoint_step(newest) == STEPS and ckpt.verify(newest)
    if damage == "truncate_model":
        target = newest / "encoder.safetensors"
        os.truncate(target, target.stat().st_size // 2)
    elif damage == "random_bytes_state":
        target = newest / "state.json"
        target.write_bytes(os.urandom(target.stat().st_size))
    elif damage == "no_manifest":
        (newest / ckpt.MANIFEST).unlink()
    else:
        (newest / "optimizer.safetensors").unlink()
    (out_dir / "model.safetensors").unlink()  # so the final model must be produced again
    with caplog.at_level(logging.WARNING, logger="cselab.train.checkpoint"):
        summary = train(load_config_for(corpus_file, out_dir), progress=False)
    assert any("incomplete or corrupt" in r.getMessage() and newest.name in r.getMessage() for r in caplog.records)
    assert (out_dir / "checkpoints" / f"corrupt-{newest.name}").is_dir()
    assert summary["finished"]
    # Resumed from the previous checkpoint (step 9): steps 10-12 replayed, same result.
    assert_same_weights(model_weights(out_dir), model_weights(reference_run))
    assert_same_metrics(metric_records(out_dir), metric_records(reference_run))


def test_a_half_written_checkpoint_directory_is_ignored(tmp_path, corpus_file, reference_run, crash_at, monkeypatch):
    """A kill during save leaves only `.step-N.tmp`; it is never mistaken for a checkpoint."""
    out_dir = tmp_path / "run"
    crash_at(8)
    with pytest.raises(Exception, match=CRASHED):
        train(load_config_for(corpus_file, out_dir), progress=False)
    monkeypatch.undo()
    partial = out_dir / "checkpoints" / ".step-00000009.tmp"
    partial.mkdir()
    (partial / "encoder.safetensors").write_bytes(b"\0" * 100)
    assert [p.name for p in ckpt.list_checkpoints(out_dir / "checkpoints")] == ["step-00000003", "step-00000006"]
    train(load_config_for(corpus_file, out_dir), progress=False)
    assert_same_weights(model_weights(out_dir), model_weights(reference_run))


def test_resume_with_different_settings_is_refused_naming_the_keys(tmp_path, corpus_file, reference_run):
    out_dir = tmp_path / "run"
    shutil.copytree(reference_run, out_dir)
    metrics_before = (out_dir / "metrics.jsonl").read_text()
    with pytest.raises(ConfigError) as info:
        train(load_config_for(corpus_file, out_dir, **{"optim.lr": "2e-3", "optim.batch_size": 16}), progress=False)
    message = str(info.value)
    assert "\n" not in message and "optim.lr" in message and "optim.batch_size" in message
    assert "train.seed" not in message and "--no-resume" in message
    assert (out_dir / "metrics.jsonl").read_text() == metrics_before  # refused before touching anything
    # Settings that cannot change the result may differ.
    summary = train(load_config_for(corpus_file, out_dir, **{"train.save_steps": 5, "train.log_steps": 2,
                                                              "train.num_workers": 1}), progress=False)
    assert summary["finished"]


def test_no_resume_starts_over_and_forgets_the_old_run(tmp_path, corpus_file, reference_run, crash_at, monkeypatch):
    out_dir = tmp_path / "run"
    shutil.copytree(reference_run, out_dir)
    crash_at(4)
    with pytest.raises(Exception, match=CRASHED):
        train(load_config_for(corpus_file, out_dir, **{"optim.lr": "2e-3"}), resume=False, progress=False)
    monkeypatch.undo()
    # The old run's checkpoints (up to step 12) are gone: a resume now continues the new run.
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(out_dir / "checkpoints")] == [3]
    assert [r["step"] for r in metric_records(out_dir)] == [1, 2, 3]


def test_checkpoint_holds_no_pickle(reference_run):
    latest = ckpt.latest_valid_checkpoint(reference_run / "checkpoints")
    names = sorted(p.name for p in latest.iterdir())
    assert names == sorted([ckpt.MANIFEST, "state.json", "encoder.safetensors", "heads.safetensors",
                            "optimizer.safetensors", "rng.safetensors"])
    for name in names:
        head = (latest / name).read_bytes()[:2]
        assert head != b"\x80\x04" and head != b"PK"  # neither a pickle stream nor a torch.save zip
    state = ckpt.read_state(latest)
    assert state["step"] == STEPS and state["config"]["optim"]["batch_size"] == 8


@pytest.mark.parametrize("mode", ["after_best_save", "during_best_save"])
def test_best_dev_model_stays_consistent_across_a_crash(tmp_path, corpus_file, stsb_dev_dir, monkeypatch, mode):
    """The best model is saved between checkpoints; a crash after (or in the middle of) that save
    must leave the directory, its marker and the resumed run agreeing with an uninterrupted run."""
    extra = {"train.eval_steps": 2, "train.save_steps": 4, "data.dev_dir": str(stsb_dev_dir)}
    reference = tmp_path / "reference"
    train(load_config_for(corpus_file, reference, **extra), progress=False)
    best = json.loads((reference / BEST_MODEL).read_text())
    evaluated = [r for r in metric_records(reference) if "stsb_dev" in r]
    assert len(evaluated) == STEPS // 2
    # A best-model save strictly between two checkpoints (steps 4k+2) to crash after/during.
    saves, best_so_far = [], None
    for record in evaluated:
        if best_so_far is None or record["stsb_dev"] > best_so_far:
            best_so_far = record["stsb_dev"]
            saves.append(record["step"])
    between = [s for s in saves if s % 4 == 2]
    assert between, f"pick another seed: the best model is only saved at checkpoint steps {saves}"
    crash_step = between[-1]

    out_dir = tmp_path / "run"
    original = Tracked.save

    def crashing_save(self, write_model):
        directory = self.directory
        if self.step == crash_step:
            if mode == "during_best_save":
                (directory / BEST_MODEL).unlink(missing_ok=True)
                (directory / "model.safetensors").write_bytes(b"partial")
                raise Crash(f"{CRASHED}: killed while writing the best model")
            original(self, write_model)
            raise Crash(f"{CRASHED}: killed right after writing the best model")
        original(self, write_model)

    monkeypatch.setattr(Tracked, "save", crashing_save)
    with pytest.raises(Exception, match=CRASHED):
        train(load_config_for(corpus_file, out_dir, **extra), progress=False)
    monkeypatch.undo()
    summary = train(load_config_for(corpus_file, out_dir, **extra), progress=False)
    assert json.loads((out_dir / BEST_MODEL).read_text()) == best
    assert summary["best_step"] == best["step"] and summary["best_stsb_dev"] == pytest.approx(best["stsb_dev"])
    assert_same_weights(model_weights(out_dir), model_weights(reference))
    assert_same_metrics(metric_records(out_dir), metric_records(reference))


def crash_on_a_copy_of_the_corpus(tmp_path, corpus_file, crash_at, monkeypatch):
    """A run on a copy of the corpus, crashed at step 5 (its last checkpoint: step 3)."""
    corpus, out_dir = tmp_path / "corpus.txt", tmp_path / "run"
    shutil.copy(corpus_file, corpus)
    crash_at(5)
    with pytest.raises(Exception, match=CRASHED):
        train(load_config_for(corpus, out_dir), progress=False)
    monkeypatch.undo()
    return corpus, out_dir


def test_resume_on_a_changed_corpus_is_refused(tmp_path, corpus_file, crash_at, monkeypatch):
    """Same path and settings, different content: the checkpoint's corpus fingerprint catches it."""
    corpus, out_dir = crash_on_a_copy_of_the_corpus(tmp_path, corpus_file, crash_at, monkeypatch)
    corpus.write_text(corpus.read_text().replace("cat", "cow"))
    with pytest.raises(ConfigError, match=r"step-00000003: .*corpus.txt: the corpus changed since the checkpoint"):
        train(load_config_for(corpus, out_dir), progress=False)


def test_touching_the_corpus_after_a_crash_does_not_block_the_resume(tmp_path, corpus_file, crash_at, monkeypatch,
                                                                    reference_run):
    """The fingerprint is the corpus's content: a new mtime with the same bytes resumes, and the
    resumed run ends like the uninterrupted one."""
    corpus, out_dir = crash_on_a_copy_of_the_corpus(tmp_path, corpus_file, crash_at, monkeypatch)
    stat = corpus.stat()
    os.utime(corpus, ns=(stat.st_atime_ns + 10**9, stat.st_mtime_ns + 10**9))  # `touch`: new mtime, same bytes
    summary = train(load_config_for(corpus, out_dir), progress=False)
    assert summary["finished"]
    assert_same_weights(model_weights(out_dir), model_weights(reference_run))
