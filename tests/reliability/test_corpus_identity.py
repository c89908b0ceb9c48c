"""The corpus is identified by its content: touching (or moving) it keeps a run resumable, the
resumed run ends like the uninterrupted one; only a real change is refused (test_resume.py)."""
from __future__ import annotations

import os
import shutil

import pytest

from cselab.train.loop import train
from tests.reliability.conftest import CRASHED, assert_same_weights, load_config_for, model_weights


def test_touching_the_corpus_after_a_crash_does_not_block_the_resume(tmp_path, corpus_file, crash_at, monkeypatch,
                                                                    reference_run):
    corpus, out_dir = tmp_path / "corpus.txt", tmp_path / "run"
    shutil.copy(corpus_file, corpus)
    crash_at(5)
    with pytest.raises(Exception, match=CRASHED):
        train(load_config_for(corpus, out_dir), progress=False)
    monkeypatch.undo()
    stat = corpus.stat()
    os.utime(corpus, ns=(stat.st_atime_ns + 10**9, stat.st_mtime_ns + 10**9))  # `touch`: new mtime, same bytes
    summary = train(load_config_for(corpus, out_dir), progress=False)
    assert summary["finished"]
    assert_same_weights(model_weights(out_dir), model_weights(reference_run))
