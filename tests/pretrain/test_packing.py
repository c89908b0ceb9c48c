"""Packing: every token of every training line in exactly one block, in order, no block over its
size or across a document; token ids cached once per corpus and tokenizer, as .npy files."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cselab.data.indexed import IndexedTextCorpus
from cselab.data.packing import PackedBlocks, PackedCollator, block_tokens
from cselab.data.split import hold_out
from cselab.data.token_cache import TokenIds, document_starts, special_frame, token_ids
from cselab.losses.masking import MlmMasking
from tests.pretrain.conftest import minilm_tokenizer, write_lines


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


def line_ids(tokenizer, lines: list[str]) -> list[list[int]]:
    return tokenizer(lines, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("size", [1, 5, 14, 1000])
def test_blocks_hold_every_training_token_once_in_order(tmp_path, tokenizer, size):
    lines = write_lines(tmp_path / "c.txt", count=50)
    tokens = token_ids(IndexedTextCorpus(tmp_path / "c.txt"), tokenizer)
    split = hold_out(len(lines), 0.2)
    blocks = PackedBlocks(tokens, split.train, size)
    expected = [i for row in split.train for i in line_ids(tokenizer, [lines[row]])[0]]
    got = [blocks[b] for b in range(len(blocks))]
    assert all(1 <= len(block) <= size for block in got)
    assert all(len(block) == size for block in got[:-1])  # one stream: only the last block is short
    assert np.concatenate(got).tolist() == expected  # nothing dropped, nothing repeated, in order
    assert len(blocks) == -(-len(expected) // size)


def test_no_block_spans_two_documents(tmp_path, tokenizer):
    """Blank lines end documents; a document's first line held out for validation still ends the
    document before it."""
    lines = write_lines(tmp_path / "c.txt", count=40, blank_every=7)
    corpus = IndexedTextCorpus(tmp_path / "c.txt")
    tokens = token_ids(corpus, tokenizer)
    assert np.flatnonzero(tokens.document_starts).tolist() == list(range(0, 40, 7))
    training = np.array([i for i in range(40) if i not in (7, 15, 22)])  # 7: a document's first line
    blocks = PackedBlocks(tokens, training, 9, documents=True)
    ids = line_ids(tokenizer, lines)
    documents = [[i for row in training if start <= row < start + 7 for i in ids[row]] for start in range(0, 40, 7)]
    got, position = [blocks[b].tolist() for b in range(len(blocks))], 0
    for document in documents:  # each document's blocks: its tokens alone, cut every 9
        cut = [document[k:k + 9] for k in range(0, len(document), 9)]
        assert got[position:position + len(cut)] == cut
        position += len(cut)
    assert position == len(got)
    one_stream = PackedBlocks(tokens, training, 9, documents=False)
    assert len(one_stream) < len(blocks)  # without documents the short last blocks are filled up


def test_document_starts_follow_the_line_index_for_any_line_ending(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"one\r\ntwo\r\n\r\nthree\rfour\r\rfive\n   \nsix\nseven")
    corpus = IndexedTextCorpus(path)
    assert list(corpus) == ["one", "two", "three", "four", "five", "six", "seven"]
    assert document_starts(corpus).tolist() == [True, False, True, False, True, True, False]


def test_collator_frames_blocks_and_pads_only_the_short_one(tmp_path, tokenizer):
    write_lines(tmp_path / "c.txt", count=10)
    tokens = token_ids(IndexedTextCorpus(tmp_path / "c.txt"), tokenizer)
    size = block_tokens(tokenizer, 16)
    assert special_frame(tokenizer) == ([tokenizer.cls_token_id], [tokenizer.sep_token_id]) and size == 14
    blocks = PackedBlocks(tokens, np.arange(10), size)
    rows = [blocks[0], blocks[len(blocks) - 1]]
    assert len(rows[1]) < size
    features = PackedCollator(tokenizer, {"masked": MlmMasking(tokenizer)}, seed=0).tensors(rows)
    ids, attention = features["input_ids"], features["attention_mask"]
    assert ids.shape == (2, 16)
    assert ids[0].tolist() == [tokenizer.cls_token_id, *rows[0].tolist(), tokenizer.sep_token_id]
    real = len(rows[1]) + 2
    assert ids[1, :real].tolist() == [tokenizer.cls_token_id, *rows[1].tolist(), tokenizer.sep_token_id]
    assert attention[0].all() and attention[1, :real].all() and not attention[1, real:].any()
    assert (ids[1, real:] == tokenizer.pad_token_id).all()
    batch = PackedCollator(tokenizer, {"masked": MlmMasking(tokenizer)}, seed=0)((7, rows))
    assert batch.step == 7 and batch.real_tokens == 16 + real and batch.padded_tokens == 32
    again = PackedCollator(tokenizer, {"masked": MlmMasking(tokenizer)}, seed=0)((7, rows))
    assert torch.equal(batch.masked.features["input_ids"], again.masked.features["input_ids"])


def test_token_ids_are_cached_as_npy_and_retokenised_only_when_the_text_changes(tmp_path, monkeypatch,
                                                                                private_cache):
    path = tmp_path / "c.txt"
    lines = write_lines(path, count=12)
    tokenizer = minilm_tokenizer()  # never called yet: calls leave truncation and padding settings behind
    first = token_ids(IndexedTextCorpus(path), tokenizer)
    tokenizer(["a sentence"], padding="max_length", truncation=True, max_length=16)
    assert [first.line(i).tolist() for i in range(len(first))] == line_ids(tokenizer, lines)
    files = sorted(p.name for p in (private_cache / "token-ids").iterdir())
    assert files == sorted(f"{first.key}.{part}.npy" for part in ("ids", "starts", "documents"))  # no part files
    for name in files:
        np.load(private_cache / "token-ids" / name, allow_pickle=False)  # plain arrays: no pickle needed
    assert first.ids.dtype == np.uint16

    def no_tokenising(*args, **kwargs):
        raise AssertionError("tokenised again")

    monkeypatch.setattr(type(tokenizer), "__call__", no_tokenising)
    path.touch()  # a new modification time, the same content: the same key
    assert token_ids(IndexedTextCorpus(path), tokenizer).key == first.key
    monkeypatch.undo()
    path.write_text(path.read_text().replace("In ", "About "), encoding="utf-8")
    assert token_ids(IndexedTextCorpus(path), tokenizer).key != first.key
    other = minilm_tokenizer()
    other.add_tokens(["[DEL]"], special_tokens=True)  # another vocabulary: another key
    assert token_ids(IndexedTextCorpus(path), other).key not in (first.key, token_ids(IndexedTextCorpus(path),
                                                                                     tokenizer).key)


def test_token_ids_reopen_in_worker_processes_without_copying(tmp_path, tokenizer):
    import pickle

    write_lines(tmp_path / "c.txt", count=250)
    tokens = token_ids(IndexedTextCorpus(tmp_path / "c.txt"), tokenizer)
    assert tokens.ids.nbytes > 4000
    assert len(pickle.dumps(tokens)) < 1000  # the cache's place, not its ids
    blocks = PackedBlocks(tokens, np.arange(250), 14)
    copy = pickle.loads(pickle.dumps(blocks))  # what a spawned data-loader worker receives
    assert isinstance(copy.tokens, TokenIds)
    assert all(np.array_equal(copy[b], blocks[b]) for b in range(len(blocks)))
