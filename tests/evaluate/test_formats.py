"""SentEval file formats: blank gold lines, extra columns, headers, latin-1 bytes, BOMs."""
from __future__ import annotations

import numpy as np
import pytest

from cselab.evaluate import formats, tasks


def test_sts_subset_skips_blank_gold_and_keeps_alignment(tmp_path):
    (tmp_path / "in.txt").write_text("a one\tb one\na two\tb two\na  three \tb three\n")
    (tmp_path / "gs.txt").write_text("4.5\n\n1\n")
    pairs = formats.read_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt")
    assert pairs.left == ["a one", "a three"]
    assert pairs.right == ["b one", "b three"]
    assert pairs.gold.tolist() == [4.5, 1.0]


def test_sts_subset_length_mismatch_names_the_file(tmp_path):
    (tmp_path / "in.txt").write_text("a\tb\nc\td\n")
    (tmp_path / "gs.txt").write_text("1\n")
    with pytest.raises(formats.DataFormatError, match="gs.txt: 1 gold line for 2 sentence pairs"):
        formats.read_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt")


def test_sts_subset_bad_score_names_file_and_line(tmp_path):
    (tmp_path / "in.txt").write_text("a\tb\nc\td\n")
    (tmp_path / "gs.txt").write_text("1\nhigh\n")
    with pytest.raises(formats.DataFormatError, match=r"gs.txt:2: gold score 'high'"):
        formats.read_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt")


def test_stsb_extra_columns_and_quotes(tmp_path):
    path = tmp_path / "sts-dev.csv"
    path.write_text('main-captions\tMSRvid\t2012test\t0001\t5.000\tA "quoted" man.\tA man.\n'
                    "main-news\theadlines\t2015\t0002\t1.5\tOne.\tTwo.\tsrc-a\tsrc-b\n")
    pairs = formats.read_stsb(path)
    assert pairs.left == ['A "quoted" man.', "One."]
    assert pairs.right == ["A man.", "Two."]
    np.testing.assert_allclose(pairs.gold, [5.0, 1.5])


def test_stsb_too_few_columns(tmp_path):
    path = tmp_path / "sts-dev.csv"
    path.write_text("a\tb\tc\td\t5.0\tonly one sentence\n")
    with pytest.raises(formats.DataFormatError, match=r"sts-dev.csv:1: expected at least 7"):
        formats.read_stsb(path)


def test_sick_header_is_skipped(tmp_path):
    path = tmp_path / "SICK_trial.txt"
    path.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    "4\tA boy plays\tNo boy plays\t3.6\tCONTRADICTION\n")
    pairs = formats.read_sick(path)
    assert (pairs.left, pairs.right, pairs.gold.tolist()) == (["A boy plays"], ["No boy plays"], [3.6])


def test_latin1_bytes_and_utf8_bom(tmp_path):
    (tmp_path / "pos").write_bytes("un caf\xe9 tr\xe8s bon\n".encode("latin-1"))
    (tmp_path / "neg").write_bytes("na\xefve and dull\n".encode("latin-1"))
    data = formats.read_binary(tmp_path / "pos", tmp_path / "neg")
    assert data.sentences == ["un café très bon", "naïve and dull"]
    assert data.labels.tolist() == [1, 0]
    (tmp_path / "mrpc.txt").write_bytes("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                        "1\t1\t2\tCafé ok\tCafé fine\n".encode("utf-8"))
    pairs = formats.read_mrpc(tmp_path / "mrpc.txt")
    assert (pairs.left, pairs.right, pairs.labels.tolist()) == (["Café ok"], ["Café fine"], [1])


def test_trec_and_sst(tmp_path):
    (tmp_path / "trec").write_bytes(b"HUM:ind Who wrote Caf\xe9 ?\nNUM:date When was it ?\n")
    data = formats.read_trec(tmp_path / "trec")
    assert data.sentences == ["Who wrote Café ?", "When was it ?"]
    assert data.labels.tolist() == [formats.TREC_CLASSES.index("HUM"), formats.TREC_CLASSES.index("NUM")]
    (tmp_path / "sst").write_text("a fine film \t1\nbad\t0\n")
    sst = formats.read_sst(tmp_path / "sst")
    assert (sst.sentences, sst.labels.tolist()) == (["a fine film", "bad"], [1, 0])
    (tmp_path / "bad").write_text("no label here\n")
    with pytest.raises(formats.DataFormatError, match="bad:1"):
        formats.read_sst(tmp_path / "bad")


def test_missing_file_points_to_download(tmp_path):
    with pytest.raises(formats.MissingDataError, match="cselab data download"):
        tasks.build(["STS12"], tmp_path)
    with pytest.raises(FileNotFoundError, match=r"sts-dev.csv: not found"):
        tasks.build(["STSB"], tmp_path, split="dev")


def test_task_names_and_groups():
    assert tasks.resolve("sts") == ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    assert tasks.resolve("all", "dev") == ["STSBenchmark", "SICKRelatedness", "SST2", "MRPC", "align"]
    assert tasks.resolve("sts-b,SICK-R,sst-2") == ["STSBenchmark", "SICKRelatedness", "SST2"]
    with pytest.raises(KeyError, match="unknown evaluation task 'STS99'"):
        tasks.resolve("STS99")
    with pytest.raises(KeyError, match="STS12 has no dev split"):
        tasks.build(["STS12"], ".", split="dev")


def test_synthetic_directory_parses_every_task(senteval_dir):
    for split in ("test", "dev"):
        for task in tasks.build(tasks.resolve("all", split), senteval_dir, split):
            assert task.sentences(), task.name
    sts12 = tasks.build(["STS12"], senteval_dir)[0].data()
    assert all(len(p) == 5 for p in sts12.values())  # 6 pairs, one blank gold line each


def test_format_samples_parse(shared_data):
    samples = shared_data / "format-samples"
    msrpar = formats.read_sts_subset(samples / "STS/STS12-en-test/STS.input.MSRpar.txt",
                                     samples / "STS/STS12-en-test/STS.gs.MSRpar.txt")
    assert len(msrpar) == len((samples / "STS/STS12-en-test/STS.gs.MSRpar.txt").read_text().splitlines())
    headlines_gold = (samples / "STS/STS16-en-test/STS.gs.headlines.txt").read_text().splitlines()
    headlines = formats.read_sts_subset(samples / "STS/STS16-en-test/STS.input.headlines.txt",
                                        samples / "STS/STS16-en-test/STS.gs.headlines.txt")
    assert len(headlines) == sum(1 for g in headlines_gold if g.strip()) < len(headlines_gold)
    assert all(0 <= g <= 5 for g in headlines.gold)
    for folder, pos, neg in (("MR", "rt-polarity.pos", "rt-polarity.neg"), ("CR", "custrev.pos", "custrev.neg"),
                             ("MPQA", "mpqa.pos", "mpqa.neg")):
        data = formats.read_binary(samples / folder / pos, samples / folder / neg)
        assert len(data.sentences) == len(data.labels) > 0
        assert all(s == s.strip() and s for s in data.sentences)
    trec = formats.read_trec(samples / "TREC/train_5500.label")
    assert len(trec.sentences) == len((samples / "TREC/train_5500.label").read_text().splitlines())
    assert set(trec.labels.tolist()) <= set(range(6))


def test_dev_data_parses(shared_data):
    dev = shared_data / "senteval-dev"
    stsb = formats.read_stsb(dev / "STS/STSBenchmark/sts-dev.csv")
    assert len(stsb) == len((dev / "STS/STSBenchmark/sts-dev.csv").read_text(encoding="utf-8").splitlines())
    mrpc = formats.read_mrpc(dev / "MRPC/msr_paraphrase_train.txt")
    assert set(mrpc.labels.tolist()) == {0, 1}
