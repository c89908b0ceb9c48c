"""Your own evaluation data: `cselab eval --sts-file / --classification-file`, their readers, and the task
registry every table derives from."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from scipy.stats import spearmanr

from cselab import cli
from cselab.evaluate import formats, load_model, report, tasks

WORDS = "a man woman dog cat plays runs guitar piano park street eats food reads book".split()


def _pairs(n: int = 30, seed: int = 0) -> list[tuple[str, str, float]]:
    rng = random.Random(seed)
    return [(" ".join(rng.choices(WORDS, k=5)), " ".join(rng.choices(WORDS, k=5)), round(rng.uniform(1, 10), 2))
            for _ in range(n)]


def test_pairs_file_formats_agree(tmp_path):
    rows = _pairs()
    tsv = tmp_path / "p.tsv"
    tsv.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows))  # no header: sentence, sentence, score
    csv = tmp_path / "p.csv"  # a header in another order, an extra column, a quoted comma
    csv.write_text("score,id,sentence2,sentence1\n"
                   + "".join(f'{s},{i},"{b}","{a}"\n' for i, (a, b, s) in enumerate(rows)))
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "score": s}) + "\n" for a, b, s in rows))
    read = [formats.read_pairs_file(f) for f in (tsv, csv, jsonl)]
    for pairs in read:
        assert pairs.left == [a for a, _, _ in rows] and pairs.right == [b for _, b, _ in rows]
        assert pairs.gold.tolist() == [s for _, _, s in rows]
    comma = tmp_path / "c.csv"
    comma.write_text('sentence1,sentence2,score\n"one, two",three,1\nfour,five,2\n')
    assert formats.read_pairs_file(comma).left == ["one, two", "four"]


@pytest.mark.parametrize("name,content,message", [
    ("bad.tsv", "a\tb\t1\nc\td\tlots\n", "bad.tsv:2: score 'lots' is not a number"),
    ("short.tsv", "a\tb\t1\nc\td\n", "short.tsv:2: expected sentence, sentence and score columns, found 2 columns"),
    ("bad.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "a"}\n',
     "bad.jsonl:2: expected a JSON object with the keys sentence1, sentence2, score"),
    ("one.tsv", "a\tb\t1\n", "one.tsv: 1 scored pair; a correlation needs at least 2"),
])
def test_pairs_file_errors_name_file_and_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(formats.DataFormatError) as caught:
        formats.read_pairs_file(path)
    assert str(caught.value) == f"{path.parent}/{message}"


def test_labelled_file_reads_text_and_label(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps({"text": f"s {i}", "label": ["b", "a", "c"][i % 3]}) + "\n" for i in range(9)))
    data, names = formats.read_labelled_file(path)
    assert names == ["a", "b", "c"] and data.labels.tolist() == [1, 0, 2] * 3
    one = tmp_path / "one.csv"
    one.write_text("text,label\nx,pos\ny,pos\n")
    with pytest.raises(formats.DataFormatError, match="one.csv: 1 label found; a classification needs at least 2"):
        formats.read_labelled_file(one)


def test_eval_sts_file_scores_spearman_of_cosine_without_senteval(saved_model, tmp_path, monkeypatch):
    monkeypatch.delenv("CSELAB_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.cache/cselab/senteval: the files need none
    rows = _pairs()
    pairs = tmp_path / "domain.tsv"
    pairs.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows))
    out = tmp_path / "own.json"
    assert cli.main(["eval", str(saved_model), "--sts-file", str(pairs), "--json", str(out), "--no-cache",
                     "--quiet", "--precision", "fp32"]) == 0
    result = json.loads(out.read_text())
    entry = result["tasks"][f"sts:{pairs}"]
    model = load_model(str(saved_model), precision="fp32")  # the same encoder, outside the task code
    model.show_progress = False
    # float64: a random tiny model's cosines are all near 1, and float32 would reorder them
    a, b = (model.encode([r[i] for r in rows]).astype(np.float64) for i in (0, 1))
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert entry["spearman"] == pytest.approx(spearmanr(cosine, [r[2] for r in rows]).statistic * 100, abs=1e-6)
    assert entry["score_range"] == [min(r[2] for r in rows), max(r[2] for r in rows)] and entry["n"] == len(rows)
    assert result["avg"] is None and result["avg_over"] == []  # the papers' average is over SentEval's STS only
    assert "| Model (pooler) | domain.tsv |" in out.with_suffix(".md").read_text()


def test_eval_classification_file_beside_senteval_tasks(saved_model, senteval_dir, tmp_path):
    rng = random.Random(1)
    path = tmp_path / "topics.csv"
    path.write_text("text,label\n" + "".join(f"{' '.join(rng.choices(WORDS, k=4))},{label}\n"
                                             for label in ("x", "y") for _ in range(12)))
    out = tmp_path / "both.json"
    assert cli.main(["eval", str(saved_model), "--tasks", "STSB", "--classification-file", str(path),
                     "--data-dir", str(senteval_dir), "--transfer-mode", "fast", "--json", str(out), "--no-cache",
                     "--quiet"]) == 0
    result = json.loads(out.read_text())
    entry = result["tasks"][f"classification:{path}"]
    assert entry["labels"] == ["x", "y"] and entry["n"] == 24 and 0 <= entry["score"] <= 100
    assert result["avg_over"] == ["STSBenchmark"]


def test_too_few_examples_per_label_is_one_line(saved_model, tmp_path, capsys):
    path = tmp_path / "few.tsv"
    path.write_text("".join(f"s{i}\t{'ab'[i % 2]}\n" for i in range(12)))
    assert cli.main(["eval", str(saved_model), "--classification-file", str(path), "--quiet", "--no-cache"]) == 2
    assert "has 6 examples; 10-fold nested cross-validation needs at least 20 of each label" in capsys.readouterr().err


@pytest.fixture
def restored_tasks():
    saved = tasks.TASKS.snapshot()
    yield
    tasks.TASKS.restore(saved)


def test_a_new_task_is_one_registered_class(restored_tasks, senteval_dir):
    """Groups, names, dev support and table headings all come from the class's own metadata."""

    @tasks.task("STSBTrain", "STS-B's training file as a further STS column")
    class STSBTrain(tasks.STSPairs):
        display, dev_label, aliases = "STS-B train", "STS-B train (dev)", ("stsbtrain",)
        FILES = {"test": tasks.STSB_FILES["train"], "dev": tasks.STSB_FILES["train"]}

    assert tasks.group_names("sts")[-1] == "STSBTrain" and "STSBTrain" in tasks.dev_names()
    assert tasks.resolve("stsb-train,sts", "dev") == ["STSBTrain", "STSBenchmark", "SICKRelatedness"]
    assert tasks.label("STSBTrain", "dev") == "STS-B train (dev)" and tasks.label("STSBTrain", "test") == "STS-B train"
    built = tasks.build(["STSBTrain"], senteval_dir, "dev")[0]
    result = {"model": "m", "pooler": "cls", "split": "dev", "avg": 1.0, "data_dir": "d", "seed": 1, "date": "now",
              "tasks": {"STSBTrain": {"score": 1.0}}}
    assert built.files() == [senteval_dir / "STS/STSBenchmark/sts-train.csv"]
    assert "| Model (pooler) | STS-B train (dev) | Avg. |" in report.markdown([result])


def test_own_files_are_read_on_either_split(tmp_path):
    pairs = tmp_path / "p.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in _pairs()))
    labelled = tmp_path / "l.tsv"
    labelled.write_text("".join(f"s {i}\t{'xy'[i % 2]}\n" for i in range(40)))
    for split in ("test", "dev"):
        built = tasks.build(tasks.resolve([f"sts:{pairs}", f"classification:{labelled}"], split), None, split)
        assert [t.files() for t in built] == [[pairs], [labelled]]
        assert [tasks.label(t.name, split) for t in built] == ["p.tsv", "l.tsv"]
