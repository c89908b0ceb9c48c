"""`cselab augment` writes a resumable jsonl cache that the `cached` augmenter reads."""
import json
from pathlib import Path

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


def test_list_tags_the_16_augcse_augmenters_with_their_smallest_set(capsys):
    assert main(["augment", "--list"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.strip()}
    tagged = {name: next(cell for cell in row if cell.startswith("augcse-"))
              for name, row in rows.items() if any(cell.startswith("augcse-") for cell in row[1:3])}
    assert len(tagged) == 16
    # The 4-set is the paper's asterisks; the 16-set's last four are outside the 12.
    assert {n for n, s in tagged.items() if s == "augcse-4"} == {"contraction", "back_translation",
                                                                 "tense_transformation", "random_swap"}
    assert tagged["color_transformation"] == tagged["number_to_word"] == "augcse-16"
    assert tagged["yoda"] == "augcse-12" and "eda_random_swap" not in tagged


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


# --- caches `cached` builds itself for the training corpus (no `path`) ------------------------------

SENTENCES = [f"The cat number {i} sat on the mat near the river ." for i in range(25)]


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    """A fresh $CSELAB_CACHE, and a working directory elsewhere: nothing may land in the latter."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("CSELAB_CACHE", str(home))
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return home


@pytest.fixture
def crop_calls(monkeypatch):
    """Every batch of sentences random_crop is asked to augment."""
    from cselab.augment.lexical import RandomCrop

    calls: list[list[str]] = []
    original = RandomCrop.augment

    def counting(self, sentences, seed):
        calls.append(list(sentences))
        return original(self, sentences, seed)

    monkeypatch.setattr(RandomCrop, "augment", counting)
    return calls


def test_cached_builds_its_cache_on_first_fit_and_a_second_run_reuses_it(cache_home, crop_calls, monkeypatch):
    first = build_augmenter("cached", augmenter={"name": "random_crop"}, chunk_size=4).fit(SENTENCES)
    assert [len(call) for call in crop_calls] == [4] * 6 + [1]  # in chunks, each sentence once
    expected = build_augmenter("random_crop").augment(SENTENCES, 0)
    assert [r["augmented"] for r in records(first.cache_file)] == expected
    assert first.cache_file.parent == cache_home / "augmented"  # not below the working directory
    assert not any(Path.cwd().iterdir())
    crop_calls.clear()
    second = build_augmenter("cached", augmenter={"name": "random_crop"}, chunk_size=4).fit(SENTENCES)
    assert second.cache_file == first.cache_file and not crop_calls  # read, not augmented again
    assert second.augment(SENTENCES[:3], seed=9) == expected[:3] and not crop_calls
    assert sorted(second.augmented_texts()) == sorted(expected)


def test_the_cache_is_keyed_by_corpus_content_augmenter_parameters_and_seed(cache_home):
    from cselab.augment.cache import spec_digest

    def file_for(corpus, **params):
        return build_augmenter("cached", augmenter={"name": "random_crop", **params}, **{}).fit(corpus).cache_file

    base = file_for(SENTENCES)
    assert file_for(list(SENTENCES)) == base  # the same sentences, another list
    assert file_for(SENTENCES[:-1] + ["Another last sentence ."]) != base
    assert file_for(SENTENCES, ratio=0.3) != base
    assert spec_digest({"name": "x", "num_threads": 2, "progress": True}, 0) == spec_digest({"name": "x"}, 0)
    assert spec_digest({"name": "x"}, 1) != spec_digest({"name": "x"}, 0)
    assert spec_digest({"name": "x", "ratio": 0.3}, 0) != spec_digest({"name": "x"}, 0)


def test_a_killed_build_resumes_after_the_last_complete_chunk(cache_home, crop_calls, monkeypatch):
    from cselab.augment.lexical import RandomCrop

    counting = RandomCrop.augment

    def killed_at_the_third_chunk(self, sentences, seed):
        if len(crop_calls) == 2:
            raise KeyboardInterrupt
        return counting(self, sentences, seed)

    monkeypatch.setattr(RandomCrop, "augment", killed_at_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        build_augmenter("cached", augmenter="random_crop", chunk_size=4).fit(SENTENCES)
    (part,) = (cache_home / "augmented").glob("*.jsonl.part")
    assert len(records(part)) == 8 and not list((cache_home / "augmented").glob("*.jsonl"))
    with open(part, "a", encoding="utf-8") as handle:
        handle.write('{"original": "The cat num')  # as if killed inside a write
    monkeypatch.setattr(RandomCrop, "augment", counting)
    crop_calls.clear()
    resumed = build_augmenter("cached", augmenter="random_crop", chunk_size=4).fit(SENTENCES)
    assert [s for call in crop_calls for s in call] == SENTENCES[8:]  # only what was missing
    assert [r["original"] for r in records(resumed.cache_file)] == SENTENCES
    assert [r["augmented"] for r in records(resumed.cache_file)] == build_augmenter("random_crop").augment(SENTENCES, 0)
    assert not part.exists()


def test_outputs_made_for_another_corpus_are_reused(cache_home, crop_calls):
    build_augmenter("cached", augmenter="random_crop").fit(SENTENCES)
    crop_calls.clear()
    other = SENTENCES[:10] + ["A dog number 1 ran in the park today .", "A dog number 2 ran in the park today ."]
    cached = build_augmenter("cached", augmenter="random_crop").fit(other)
    assert [s for call in crop_calls for s in call] == other[10:]
    assert len(records(cached.cache_file)) == 12


def test_a_list_of_augmenters_uses_the_first_that_runs_here(cache_home, tmp_path, monkeypatch):
    from cselab.augment.base import AugmenterUnavailable
    from cselab.augment.lexical import EdaRandomSwap

    missing_model = {"name": "paraphrase", "model": str(tmp_path / "no-model-here")}
    with pytest.warns(UserWarning, match="paraphrase is not available"):
        cached = build_augmenter("cached", augmenter=[missing_model, "random_crop"]).fit(SENTENCES)
    assert cached.cache_file.name.startswith("random_crop-")
    swap = build_augmenter("cached", augmenter=["eda_random_swap", "random_crop"]).fit(SENTENCES)
    assert swap.cache_file.name.startswith("eda_random_swap-")

    def unavailable(self, *args, **kwargs):
        raise AugmenterUnavailable("gone")

    monkeypatch.setattr(EdaRandomSwap, "__init__", unavailable)
    again = build_augmenter("cached", augmenter=["eda_random_swap", "random_crop"]).fit(SENTENCES)
    assert again.cache_file == swap.cache_file  # complete: read without building the augmenter
    with pytest.raises(AugmenterUnavailable, match="gone"):
        build_augmenter("cached", augmenter="eda_random_swap").fit(SENTENCES[:5])


def test_cached_needs_a_path_or_an_augmenter():
    with pytest.raises(ValueError, match="needs 'path'"):
        build_augmenter("cached")
    with pytest.raises(ValueError, match="chunk_size"):
        build_augmenter("cached", augmenter="random_crop", chunk_size=0)
    with pytest.raises(RuntimeError, match="fit"):
        build_augmenter("cached", augmenter="random_crop").augmented_texts()


def test_an_output_revision_keys_the_cache_and_leaves_other_augmenters_keys_alone():
    import hashlib

    from cselab.augment.cache import CACHE_FORMAT, spec_digest

    def digest_without_revision(spec, seed):
        return hashlib.sha256(json.dumps([CACHE_FORMAT, spec, seed], sort_keys=True).encode()).hexdigest()

    revised = {"name": "tense_transformation"}  # output_revision 3: older revisions' outputs must not be reused
    unrevised = {"name": "random_crop", "fraction": 0.1}
    assert spec_digest(revised, 0) != digest_without_revision(revised, 0)
    assert spec_digest(unrevised, 0) == digest_without_revision(unrevised, 0)
    # Nested in a composition (as a mapping or a bare name), the revision keys the cache too.
    nested = [
        {"name": "sequence", "steps": [{"name": "random_crop"}, {"name": "tense_transformation", "target": "past"}]},
        {"name": "one_of", "choices": ["random_crop", "tense_transformation"]},
        {"name": "with_probability", "p": 0.5, "augmenter": {"name": "tense_transformation"}},
        {"name": "cached", "augmenter": [{"name": "sequence", "steps": [revised]}, "random_crop"]},
    ]
    for spec in nested:
        assert spec_digest(spec, 0) != digest_without_revision(spec, 0), spec
    plain = {"name": "sequence", "steps": [unrevised, {"name": "eda_random_swap"}], "progress": True}
    assert spec_digest(plain, 0) == digest_without_revision({k: v for k, v in plain.items() if k != "progress"}, 0)


def test_output_revisions_finds_nested_augmenters_without_an_earlier_import():
    import subprocess
    import sys

    # A fresh interpreter: nothing has imported the family modules, so the registry starts without them.
    code = ("import sys\n"
            "from cselab.augment.cache import output_revisions\n"
            "assert 'cselab.augment.augcse' not in sys.modules\n"
            "print(output_revisions({'name': 'with_probability', 'augmenter': {'name': 'sequence', 'steps': "
            "['random_crop', {'name': 'tense_transformation'}]}}), output_revisions({'name': 'random_crop'}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "{'tense_transformation': 3} {}"


def test_resume_refuses_outputs_of_an_older_output_revision(tmp_path, capsys):
    corpus = tmp_path / "in.txt"
    corpus.write_text("He will go home .\nShe walks to the park .\n", encoding="utf-8")
    out = tmp_path / "aug.jsonl"
    args = ["augment", "--aug", "tense_transformation", "--in", str(corpus), "--out", str(out)]
    assert main(args) == 0
    sidecar = out.with_name(out.name + ".settings.json")
    saved = json.loads(sidecar.read_text(encoding="utf-8"))
    assert saved["output_revisions"] == {"tense_transformation": 3}
    full = records(out)
    # Written before the revision (no key in the sidecar), cut short: resuming would mix the two rule sets.
    out.write_text(json.dumps(full[0]) + "\n", encoding="utf-8")
    del saved["output_revisions"]
    sidecar.write_text(json.dumps(saved), encoding="utf-8")
    assert main(args) == 2
    assert "older revision of tense_transformation" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0 and records(out) == full
    # Augmenters without a revision keep the sidecar of old: files written before revisions existed resume.
    crop = ["augment", "--aug", "random_crop", "--in", str(corpus), "--out", str(tmp_path / "crop.jsonl")]
    assert main(crop) == 0
    assert "output_revisions" not in json.loads((tmp_path / "crop.jsonl.settings.json").read_text(encoding="utf-8"))
    assert main(crop) == 0
