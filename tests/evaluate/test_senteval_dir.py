"""One function finds the SentEval directory (issue 40, item 4): `cselab eval`, `cselab data check`,
training's model selection, a sweep, --paper-setting and `cselab data download` look in the same place
under the same inputs (an explicit directory, $CSELAB_DATA, the default place), and none falls back to
another place where its own lacks a file."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from senteval_files import make_senteval

from cselab.cli import _senteval_folder, build_parser, paper_setting_overrides
from cselab.config import load_config
from cselab.evaluate.cli import _data_dir
from cselab.evaluate.dev import STSB_DEV, find_senteval_dir
from cselab.evaluate.download import senteval_dir
from cselab.experiments.cli import sweep_settings
from cselab.train.selection import primary_metric


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A home whose default place holds complete data, and two other complete directories."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CSELAB_DATA", raising=False)
    return {"default": make_senteval(tmp_path / "home" / ".cache" / "cselab" / "senteval"),
            "env": make_senteval(tmp_path / "env-data"), "explicit": make_senteval(tmp_path / "explicit")}


def looked_up(explicit: Path | None) -> dict[str, Path | None]:
    """Where each command finds the SentEval directory (None: it finds none)."""
    def evaluation():
        try:
            return _data_dir(str(explicit) if explicit else None)
        except FileNotFoundError:
            return None

    config = load_config("simcse", [f"data.dev_dir={explicit}"] if explicit else [])
    sweep_argv = ["sweep", "--recipes", "simcse", "--out", "unused"]
    sweep_argv += ["--data-dir", str(explicit)] if explicit else []
    found = {"eval": evaluation(), "training": primary_metric(config)[0],
             "sweep": sweep_settings(build_parser().parse_args(sweep_argv)).data_dir}
    if explicit is None:
        dev_dir = next(item for item in paper_setting_overrides() if item.startswith("data.dev_dir="))
        found["paper setting"] = Path(dev_dir.partition("=")[2].strip('"'))
        found["download destination"] = senteval_dir()
    found["paper setting check"] = _senteval_folder(str(explicit) if explicit else None)
    return found


@pytest.mark.parametrize("source", ["explicit", "env", "default"])
def test_every_command_finds_the_same_directory(places, monkeypatch, source):
    if source == "env":
        monkeypatch.setenv("CSELAB_DATA", str(places["env"]))
    found = looked_up(places["explicit"] if source == "explicit" else None)
    assert set(found.values()) == {places[source]}, found


def test_an_incomplete_env_directory_is_not_passed_over_for_the_default_one(places, monkeypatch):
    """$CSELAB_DATA without STS-B dev: training used to take ~/.cache/cselab/senteval's while `cselab eval`
    read $CSELAB_DATA's. Now neither looks past the place the rule names."""
    (places["env"] / STSB_DEV).unlink()
    monkeypatch.setenv("CSELAB_DATA", str(places["env"]))
    found = looked_up(None)
    assert found["eval"] == places["env"] and found["training"] is None and found["sweep"] is None
    assert found["paper setting"] == found["download destination"] == places["env"]


def test_a_missing_env_directory_is_not_passed_over_either(places, monkeypatch, tmp_path):
    monkeypatch.setenv("CSELAB_DATA", str(tmp_path / "not-downloaded-yet"))
    found = looked_up(None)
    assert found["eval"] is None and found["training"] is None and found["sweep"] is None
    with pytest.raises(FileNotFoundError, match=r"not-downloaded-yet: no SentEval data directory \(\$CSELAB_DATA\)"):
        _data_dir(None)


def test_an_explicit_directory_without_stsb_dev_is_an_error_not_a_fallback(places):
    (places["explicit"] / STSB_DEV).unlink()
    with pytest.raises(FileNotFoundError, match="STS-B dev not found"):
        find_senteval_dir(str(places["explicit"]))
    assert _data_dir(str(places["explicit"])) == places["explicit"]  # eval checks each task's own files


def test_the_default_place_follows_home_at_call_time(places, tmp_path, monkeypatch):
    elsewhere = tmp_path / "other-home"
    shutil.copytree(places["default"], elsewhere / ".cache" / "cselab" / "senteval")
    monkeypatch.setenv("HOME", str(elsewhere))
    assert set(looked_up(None).values()) == {elsewhere / ".cache" / "cselab" / "senteval"}
