"""Every file cselab writes follows the umask (issue 39, item 3): the weights safetensors writes (0600 by
itself), the temporary-then-rename writes, an installed WordNet (a ``mkdtemp`` folder) and SentEval's
unpacked archive (the archive's own modes). Checked under umask 027, whose modes no default gives."""
from __future__ import annotations

import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from cselab.cli import main
from cselab.config import load_config
from cselab.file_writes import current_umask, follow_umask, replace_atomically, umask_mode
from cselab.train.loop import train
from tests.conftest import TINY_BERT
from tests.evaluate.senteval_files import make_senteval

MASK = 0o027


@pytest.fixture
def umask_027():
    previous = os.umask(MASK)
    yield
    os.umask(previous)


def wrong_modes(root: Path) -> list[str]:
    """Each file or folder under ``root`` whose mode is not what the umask gives a new one."""
    wrong = []
    for path in sorted([root, *root.rglob("*")]):
        mode = stat.S_IMODE(path.lstat().st_mode)
        if not path.is_symlink() and mode != (0o777 if path.is_dir() else 0o666) & ~MASK:
            wrong.append(f"{oct(mode)} {path.relative_to(root)}")
    return wrong


def test_the_umask_is_read_without_changing_it(umask_027):
    assert current_umask() == MASK and umask_mode() == 0o640 and umask_mode(directory=True) == 0o750
    assert current_umask() == MASK


def test_a_training_run_evaluation_and_encoding_write_every_file_by_the_umask(umask_027, tmp_path, tiny_corpus):
    data = make_senteval(tmp_path / "senteval")
    run = tmp_path / "run"
    # CLEAR: an MLM head saved beside the model; the MLP at inference: sentence-transformers' Dense module;
    # evaluations every 2 steps: the best model, its marker and a best-transfer_dev/ model; checkpoints kept.
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}", "optim.batch_size=8",
                 "train.eval_steps=2", "train.save_steps=2", "train.precision=fp32", "optim.max_steps=4",
                 "model.mlp=true", "model.mlp_only_train=false", f"data.dev_dir={data}", f"train.output_dir={run}",
                 "train.select_on=[stsb_dev,transfer_dev]"]
    train(load_config("clear-del-word", overrides), progress=False)
    assert (run / "2_Dense" / "model.safetensors").is_file() and (run / "checkpoints").is_dir()
    assert (run / "best-transfer_dev" / "model.safetensors").is_file()
    assert wrong_modes(run) == []
    cache = tmp_path / "embeddings"
    assert main(["eval", str(run), "--tasks", "STS12", "--data-dir", str(data), "--quiet", "--cache-dir", str(cache),
                 "--update-card", "--json", str(tmp_path / "out" / "eval.json")]) == 0
    assert main(["encode", str(run), "--in", str(tiny_corpus), "--out", str(tmp_path / "out" / "vectors.npy")]) == 0
    assert wrong_modes(run) == [] and wrong_modes(cache) == [] and wrong_modes(tmp_path / "out") == []


def test_a_saved_model_without_training_follows_the_umask(umask_027, tiny_encoder, tmp_path):
    tiny_encoder.save(tmp_path / "model")
    assert wrong_modes(tmp_path / "model") == []


def test_an_installed_wordnet_follows_the_umask(umask_027, tmp_path):
    from cselab.wordnet_data import wordnet_dir

    installed = wordnet_dir(tmp_path / "nltk_data")
    assert installed.is_dir() and wrong_modes(tmp_path / "nltk_data") == []


def test_an_unpacked_senteval_archive_follows_the_umask(umask_027, tmp_path):
    from cselab.evaluate.download import download

    source = make_senteval(tmp_path / "source" / "downstream")
    archive = tmp_path / "senteval.tar"
    with tarfile.open(archive, "w") as tar:
        for path in sorted([source, *source.rglob("*")]):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(source.parent)))
            info.mode = 0o700 if path.is_dir() else 0o600  # modes of the archive's maker, not of this user
            if path.is_file():
                tar.addfile(info, io.BytesIO(path.read_bytes()))
            else:
                tar.addfile(info)
    dest = tmp_path / "data" / "senteval"
    assert download(dest, url=archive.as_uri(), progress=False)["status"] == "downloaded"
    assert wrong_modes(tmp_path / "data") == []


def test_replace_atomically_writes_by_the_umask_and_leaves_nothing_on_failure(umask_027, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    target = folder / "file.json"
    with replace_atomically(target) as handle:
        handle.write("{}")
    assert target.read_text() == "{}" and wrong_modes(folder) == []
    with pytest.raises(RuntimeError), replace_atomically(target) as handle:
        handle.write("half")
        raise RuntimeError("a full disk")
    assert target.read_text() == "{}" and [p.name for p in folder.iterdir()] == ["file.json"]
    os.chmod(target, 0o600)
    follow_umask(target)
    assert wrong_modes(folder) == []
