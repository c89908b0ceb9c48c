"""ESimCSE's positives: how much longer word repetition makes them than their anchors, after truncation.

    python benchmarks/bench_word_repetition.py

Results go to benchmarks/results/word_repetition.{json,md}. (Its cost per training step against
SimCSE's is ``benchmarks/bench_method_cost.py --methods esimcse``.)

On the whole wiki sample (wiki1m-first-11913), with MiniLM's tokenizer (BERT's uncased WordPiece) at
max_seq_len 32: the share of sentences cut at 32 pieces and the extra pieces of the positive over the
anchor after truncation, by the anchor's length, for word_repetition as ``unit: subword`` (count paper
and code: the repetition on the token ids after truncation, as the authors' code) and as ``unit: word``
(in the text, before truncation: the form cselab had before, which loses the length difference of
every sentence longer than max_seq_len).
"""
from __future__ import annotations

import os
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CORPUS_NAME = "corpus/wiki1m-first-11913.txt"


BUCKETS = ((1, 16), (17, 31), (32, 32), (33, 48), (49, 10_000))  # pieces with [CLS]/[SEP], before truncation


def bench_lengths(corpus: Path, max_seq_len: int = 32, seed: int = 0) -> dict:
    from cselab.augment import build_augmenter
    from cselab.augment.base import sentence_seed
    from cselab.model.encoder import SentenceEncoder

    tokenizer = SentenceEncoder.from_pretrained("minilm", max_seq_len=max_seq_len).tokenizer
    sentences = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    full = [len(ids) for ids in tokenizer(sentences)["input_ids"]]
    cut = tokenizer(sentences, truncation=True, max_length=max_seq_len)["input_ids"]
    forms = {}
    for count in ("paper", "code"):
        augmenter = build_augmenter("word_repetition", unit="subword", count=count)
        augmenter.use_tokenizer(tokenizer)
        extra = []
        rng = random.Random(0)
        for sentence, ids in zip(sentences, cut, strict=True):
            rng.seed(sentence_seed(seed, sentence))
            plan = augmenter.token_plan(ids, rng)
            extra.append(0 if plan is None else len(plan) - len(ids))
        forms[f"subword, count {count}"] = extra
    text = build_augmenter("word_repetition").augment(sentences, seed)
    text_ids = tokenizer(text, truncation=True, max_length=max_seq_len)["input_ids"]
    forms["word, in the text (before)"] = [len(p) - len(a) for p, a in zip(text_ids, cut, strict=True)]
    table = []
    for low, high in BUCKETS:
        rows = [i for i, n in enumerate(full) if low <= n <= high]
        if rows:
            table.append({"pieces": f"{low}-{high}" if high < 10_000 else f"{low}+", "sentences": len(rows),
                          **{form: round(statistics.mean(extra[i] for i in rows), 2) for form, extra in forms.items()}})
    return {"sentences": len(sentences), "max_seq_len": max_seq_len,
            "share_cut_at_max_seq_len": round(sum(n > max_seq_len for n in full) / len(full), 4),
            "by_length": table,
            "overall_mean_extra": {form: round(statistics.mean(extra), 2) for form, extra in forms.items()}}


def main() -> None:
    lengths = bench_lengths(require_shared() / CORPUS_NAME)
    forms = list(lengths["overall_mean_extra"])
    rows = [[row["pieces"], row["sentences"], *(row[form] for form in forms)] for row in lengths["by_length"]]
    rows.append(["all", lengths["sentences"], *lengths["overall_mean_extra"].values()])
    command = "python benchmarks/bench_word_repetition.py"
    write_results("word_repetition", {"command": command, "lengths": lengths},
                  f"ESimCSE's positives: extra pieces over the anchor after truncation at max_seq_len "
                  f"{lengths['max_seq_len']}", ["pieces", "sentences", *forms], rows,
                  f"Command: `{command}`. {lengths['sentences']} sentences of the wiki sample; "
                  f"{100 * lengths['share_cut_at_max_seq_len']:.1f}% are cut at {lengths['max_seq_len']} pieces. Mean "
                  f"extra pieces of the positive over its anchor, by the sentence's length in pieces ([CLS] and [SEP] "
                  f"included, before truncation).")


if __name__ == "__main__":
    main()
