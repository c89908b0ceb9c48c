"""`cselab augment` writes a resumable jsonl cache that the `cached` augmenter reads."""
import json

import pytest

from cselab.augment import build_augmenter
from cselab.augment.cache import CacheFileError, read_cache
from cselab.cli import main


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(f"The cat number {i} sat on the mat ." for i in range(25)) + "\n\n", encoding="utf-8")
    return path


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_list_prints_every_augmenter(capsys):
    from cselab.augment import AUGMENTERS

    assert main(["augment", "--list"]) == 0
    out = capsys.readouterr().out
    for name in AUGMENTERS.names():
        assert name in out and AUGMENTERS.describe(name) in out


def test_augment_writes_records_and_resumes(corpus, tmp_path):
    out = tmp_path / "aug.jsonl"
    args = ["augment", "--aug", "random_crop,eda_random_swap", "--in", str(corpus), "--out", str(out), "--seed", "3",
            "--batch-size", "4", "--set", "random_crop.ratio=0.3"]
    assert main(args) == 0
    full = records(out)
    assert len(full) == 50  # 25 sentences (blank lines skipped) x 2 augmenters
    assert [r["augmentation"] for r in full[:4]] == ["random_crop", "eda_random_swap"] * 2
    assert all(r["changed"] == (r["augmented"] != r["original"]) for r in full)
    expected = build_augmenter("random_crop", ratio=0.3).augment([full[0]["original"]], 3)[0]
    assert full[0]["augmented"] == expected
    # Interrupt: keep 17 complete lines and half of the 18th, then run again.
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(lines[:17]) + lines[17][:10], encoding="utf-8")
    assert main(args) == 0
    assert records(out) == full
    assert main(args) == 0 and records(out) == full  # nothing left to do


def test_resume_refuses_a_different_run(corpus, tmp_path, capsys):
    out = tmp_path / "aug.jsonl"
    assert main(["augment", "--aug", "random_crop", "--in", str(corpus), "--out", str(out)]) == 0
    assert main(["augment", "--aug", "eda_random_swap", "--in", str(corpus), "--out", str(out)]) == 2
    assert "written with a different aug" in capsys.readouterr().err


def test_bad_arguments_are_one_line_errors(corpus, tmp_path, capsys):
    out = str(tmp_path / "x.jsonl")
    assert main(["augment", "--aug", "random_crop", "--in", str(corpus), "--out", out, "--set", "ratio"]) == 2
    assert main(["augment", "--aug", "random_crop", "--in", str(corpus), "--out", out, "--set", "bogus=1"]) == 2
    assert main(["augment", "--aug", "random_crop", "--in", str(tmp_path / "missing.txt"), "--out", out]) == 2
    assert main(["augment", "--aug", "nope", "--in", str(corpus), "--out", out]) == 2
    err = capsys.readouterr().err
    assert "KEY=VALUE" in err and "bogus" in err and "missing.txt" in err and "unknown augmenter 'nope'" in err


def test_cached_reads_cli_output_and_falls_back(corpus, tmp_path):
    out = tmp_path / "aug.jsonl"
    assert main(["augment", "--aug", "random_crop,word_repetition", "--in", str(corpus), "--out", str(out)]) == 0
    full = records(out)
    crop = {r["original"]: r["augmented"] for r in full if r["augmentation"] == "random_crop"}
    cached = build_augmenter("cached", path=str(out), augmentation="random_crop", augmenter={"name": "eda_random_swap"})
    sentences = list(crop)[:5] + ["A sentence that is not in the cache at all ."]
    got = cached.augment(sentences, seed=99)
    assert got[:5] == [crop[s] for s in sentences[:5]]
    assert got[5] == build_augmenter("eda_random_swap").augment(sentences[5:], 99)[0]
    assert (cached.hits, cached.misses) == (5, 1)
    cached_only = build_augmenter("cached", path=str(out), augmentation="random_crop")
    assert cached_only.augment(sentences[5:], 0) == sentences[5:]
    both = read_cache(out)
    assert len(both[sentences[0]]) == 2


def test_cache_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"original": "a", "augmented": "b"}\nnot json\n{"original": "c", "augmented": "d"}\n')
    with pytest.raises(CacheFileError, match=r"bad.jsonl:2"):
        read_cache(bad)
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"original": "a", "augmented": "b"}\n{"origi')
    with pytest.warns(UserWarning, match="torn"):
        assert read_cache(torn) == {"a": ["b"]}
    with pytest.raises(FileNotFoundError, match="cselab augment"):
        read_cache(tmp_path / "none.jsonl")


def test_resume_with_another_seed_is_refused(tmp_path, capsys):
    from cselab.cli import main

    corpus = tmp_path / "in.txt"
    corpus.write_text("the cat sat on the mat\na dog ran in the park\n", encoding="utf-8")
    out = tmp_path / "aug.jsonl"
    assert main(["augment", "--aug", "eda_random_swap", "--in", str(corpus), "--out", str(out), "--seed", "1"]) == 0
    assert main(["augment", "--aug", "eda_random_swap", "--in", str(corpus), "--out", str(out), "--seed", "2"]) == 2
    assert "different seed" in capsys.readouterr().err
    # The same settings resume (nothing left to do); --overwrite starts over with the new seed.
    assert main(["augment", "--aug", "eda_random_swap", "--in", str(corpus), "--out", str(out), "--seed", "1"]) == 0
    assert main(["augment", "--aug", "eda_random_swap", "--in", str(corpus), "--out", str(out), "--seed", "2",
                 "--overwrite"]) == 0
