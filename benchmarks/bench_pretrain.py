"""MLM pre-training speed and validation loss: cselab's mlm-pretrain vs Hugging Face's own MLM recipe.

The peer is the recipe of transformers' ``examples/pytorch/language-modeling/run_mlm.py``: lines
tokenised with the tokenizer's special tokens, concatenated and cut into blocks of ``max_seq_len``
(``group_texts``, the remainder of each 1,000-line map batch dropped), ``DataCollatorForLanguageModeling``
(15%, 80/10/10) and ``Trainer``. Both sides train the same randomly initialised BERT (the recipe's
``model.from_config``: 4 layers x 256, bert-base-uncased vocabulary from the ``minilm`` package),
from the same seed, on the same training lines (the first ``--lines`` lines of the shared
pre-training corpus minus the lines cselab's split rule holds out), with the same batch, block
length, AdamW settings (lr, betas, eps, weight decay, warm-up steps, linear decay, clipping at 1.0),
fp32, for the same number of steps: every block of both is ``max_seq_len`` real tokens, so equal
steps are equal tokens.

    python benchmarks/bench_pretrain.py [--lines 30000] [--steps 60] [--repeats 2]
    python benchmarks/bench_pretrain.py --render benchmarks/results/pretrain_speed.json   # layout only

Each training runs in a fresh process, alternating cselab, HF, cselab, HF. tokens/s = real
(non-pad) tokens trained / seconds of the training loop (cselab: ``train_seconds`` of its
summary.json, the sum of its log windows, from before the first batch is read to the last update,
without tokenising, model building or evaluation; HF: ``Trainer.train`` from ``on_train_begin`` to
``on_train_end``, without tokenising and model building). Both final models (weights and MLM head)
are then scored by one evaluation function here (:func:`validation_mlm`) on the held-out lines.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, run_worker, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CORPUS = Path("pretrain-corpus") / "offline-english-4.8m-words.txt.gz"
RECIPE = "mlm-pretrain"
EVAL_SEEDS = (0, 1, 2, 3, 4)  # masks of the shared evaluation: five fixed draws over the held-out blocks
EVAL_BATCH = 64


# -- data ---------------------------------------------------------------------------------------------
def write_corpus(source: Path, lines: int, target: Path) -> int:
    """The first ``lines`` non-empty lines of ``source``, whitespace folded as cselab's reader folds
    it, so that cselab keeps every line as written (line i is the same line on both sides)."""
    kept = 0
    with gzip.open(source, "rt", encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
        for line in src:
            text = " ".join(line.split())
            if text:
                out.write(text + "\n")
                kept += 1
                if kept == lines:
                    break
    return kept


def read_lines(corpus: Path) -> list[str]:
    return corpus.read_text(encoding="utf-8").splitlines()


def recipe_settings(args) -> dict:
    """The recipe's settings, as cselab resolves them with this run's overrides (the single source of
    the model, tokenizer, optimiser and validation fraction both sides use)."""
    from cselab.config import load_config
    from cselab.sources import resolve_model_path

    config = load_config(RECIPE, cselab_overrides(args))
    return {"model_config": dict(config.model.from_config), "tokenizer": resolve_model_path(config.model.name_or_path),
            "lr": config.optim.lr, "weight_decay": config.optim.weight_decay,
            "warmup_steps": int(config.optim.warmup_ratio * args.steps), "max_grad_norm": config.optim.max_grad_norm,
            "batch_size": config.optim.batch_size, "max_seq_len": config.model.max_seq_len,
            "validation_fraction": config.data.validation_fraction, "seed": config.train.seed,
            "epochs": config.optim.epochs}


def cselab_overrides(args) -> list[str]:
    return [f"optim.batch_size={args.batch_size}", f"model.max_seq_len={args.seq_len}", f"train.seed={args.seed}",
            f"optim.max_steps={args.steps}"]


def split(lines: list[str], fraction: float) -> tuple[list[str], list[str]]:
    """(training lines, held-out lines) by cselab's rule (data/split.py), the same for both sides."""
    from cselab.data.split import hold_out

    rows = hold_out(len(lines), fraction)
    return [lines[i] for i in rows.train], [lines[i] for i in rows.validation]


def build_model(settings: dict, tokenizer):
    """A randomly initialised BertForMaskedLM of the recipe's config, sized as cselab sizes it."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    params = dict(settings["model_config"])
    model_type = params.pop("model_type", "bert")
    params.setdefault("vocab_size", len(tokenizer))
    params.setdefault("pad_token_id", tokenizer.pad_token_id or 0)
    return AutoModelForMaskedLM.from_config(AutoConfig.for_model(model_type, **params))


# -- the shared evaluation --------------------------------------------------------------------------------
def validation_blocks(tokenizer, lines: list[str], max_seq_len: int) -> dict[str, list[list[int]]]:
    """The held-out lines as blocks in each side's layout: ``cselab`` (ids laid end to end, cut every
    max_seq_len - 2, each block framed [CLS] ... [SEP], the short last block kept: cselab's packing)
    and ``run_mlm`` (each line with its own [CLS] ... [SEP], concatenated, cut every max_seq_len, the
    remainder dropped: run_mlm's group_texts)."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    bare = [i for ids in tokenizer(lines, add_special_tokens=False)["input_ids"] for i in ids]
    room = max_seq_len - 2
    framed = [i for ids in tokenizer(lines)["input_ids"] for i in ids]
    usable = len(framed) // max_seq_len * max_seq_len
    return {"cselab": [[cls, *bare[s:s + room], sep] for s in range(0, len(bare), room)],
            "run_mlm": [framed[s:s + max_seq_len] for s in range(0, usable, max_seq_len)]}


def validation_mlm(model, tokenizer, blocks: list[list[int]], seeds=EVAL_SEEDS) -> dict:
    """Mean MLM cross-entropy (and accuracy) over every masked token of ``blocks``, masked ``len(seeds)``
    times by BERT's rule (15% of the non-special tokens; 80% [MASK], 10% random, 10% kept) with
    fixed seeds, dropout off. The masks depend only on the blocks and the seeds: both models are
    scored on exactly the same masked tokens."""
    import torch
    import torch.nn.functional as F

    special = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    loss_sum, correct, count = 0.0, 0, 0
    model.eval()
    with torch.no_grad():
        for seed in seeds:
            generator = torch.Generator().manual_seed(seed)
            for start in range(0, len(blocks), EVAL_BATCH):
                rows = blocks[start:start + EVAL_BATCH]
                ids = torch.full((len(rows), max(map(len, rows))), tokenizer.pad_token_id, dtype=torch.long)
                attention = torch.zeros_like(ids)
                for r, row in enumerate(rows):
                    ids[r, :len(row)], attention[r, :len(row)] = torch.tensor(row), 1
                protected = torch.isin(ids, special) | (attention == 0)
                selected = (torch.rand(ids.shape, generator=generator) < 0.15) & ~protected
                how = torch.rand(ids.shape, generator=generator)
                random_ids = torch.randint(len(tokenizer), ids.shape, generator=generator)
                to_mask, to_random = selected & (how < 0.8), selected & (how >= 0.8) & (how < 0.9)
                inputs = torch.where(to_random, random_ids, ids.masked_fill(to_mask, tokenizer.mask_token_id))
                logits = model(input_ids=inputs, attention_mask=attention).logits[selected].float()
                labels = ids[selected]
                loss_sum += float(F.cross_entropy(logits, labels, reduction="sum"))
                correct += int((logits.argmax(-1) == labels).sum())
                count += int(selected.sum())
    return {"loss": round(loss_sum / count, 4), "acc": round(correct / count, 4), "masked_tokens": count,
            "blocks": len(blocks)}


def score(model, tokenizer, held_out: list[str], max_seq_len: int) -> dict:
    return {layout: validation_mlm(model, tokenizer, blocks)
            for layout, blocks in validation_blocks(tokenizer, held_out, max_seq_len).items()}


# -- cselab ---------------------------------------------------------------------------------------------------
def cselab_command(corpus: Path, out: Path, args) -> list[str]:
    command = ["cselab", "train", "--recipe", RECIPE, "--corpus", str(corpus), "--output-dir", str(out),
               "--no-resume", "--max-steps", str(args.steps), "--seed", str(args.seed)]
    # One evaluation (cselab's own validation loss) and one checkpoint (the MLM head, for the shared
    # evaluation), both at the last step and outside the timed loop.
    for item in (f"optim.batch_size={args.batch_size}", f"model.max_seq_len={args.seq_len}",
                 f"train.eval_steps={args.steps}", f"train.save_steps={args.steps}"):
        command += ["--set", item]
    return command


def cselab_tokens(corpus: Path, settings: dict, args) -> tuple[int, int]:
    """(real tokens, blocks) of cselab's first ``args.steps`` steps: its own blocks and step plan,
    each block plus [CLS] and [SEP]. Every block but the training stream's last is max_seq_len."""
    from transformers import AutoTokenizer

    from cselab.data.indexed import read_corpus
    from cselab.data.packing import PackedBlocks, block_tokens
    from cselab.data.plan import StepPlan
    from cselab.data.split import hold_out
    from cselab.data.token_cache import token_ids

    tokenizer = AutoTokenizer.from_pretrained(settings["tokenizer"])
    lines, _ = read_corpus(str(corpus))
    blocks = PackedBlocks(token_ids(lines, tokenizer), hold_out(len(lines), settings["validation_fraction"]).train,
                          block_tokens(tokenizer, args.seq_len))
    plan = StepPlan(len(blocks), settings["batch_size"], settings["epochs"], settings["seed"], args.steps)
    lengths = blocks.approximate_lengths() + 2
    chosen = [int(i) for step in range(len(plan)) for i in plan[step][1]]
    return int(lengths[chosen].sum()), len(chosen)


def run_cselab(corpus: Path, work: Path, settings: dict, held_out: list[str], args) -> dict:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    out = work / "cselab"
    command = cselab_command(corpus, out, args)
    env = {k: v for k, v in os.environ.items() if k != "CSELAB_DATA"}  # no STS-B dev: MLM validation only
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cselab.cli", *command[1:]], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"cselab train failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    tokens, blocks = cselab_tokens(corpus, settings, args)

    # The final weights and MLM head, from the last step's checkpoint, as a BertForMaskedLM.
    tokenizer = AutoTokenizer.from_pretrained(settings["tokenizer"])
    checkpoint = out / "checkpoints" / f"step-{args.steps:08d}"
    model = build_model(settings, tokenizer)
    encoder = load_file(str(checkpoint / "encoder.safetensors"))
    encoder = {k: v for k, v in encoder.items() if not k.startswith("pooler.")}  # BERT's pooler: no part of MLM
    model.bert.load_state_dict(encoder, strict=True)
    heads = load_file(str(checkpoint / "heads.safetensors"))
    term = next(k.split(".")[0] for k in heads if k.endswith("decoder_bias"))
    predictions = model.cls.predictions
    with torch.no_grad():
        predictions.transform.dense.weight.copy_(heads[f"{term}.transform.weight"])
        predictions.transform.dense.bias.copy_(heads[f"{term}.transform.bias"])
        predictions.transform.LayerNorm.weight.copy_(heads[f"{term}.norm.weight"])
        predictions.transform.LayerNorm.bias.copy_(heads[f"{term}.norm.bias"])
        predictions.bias.copy_(heads[f"{term}.decoder_bias"])
        if predictions.decoder.bias is not None and predictions.decoder.bias is not predictions.bias:
            predictions.decoder.bias.copy_(heads[f"{term}.decoder_bias"])
    assert predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight  # tied, as in cselab
    own = [r for r in records if "val_mlm_loss" in r][-1]
    return {"steps": summary["steps"], "tokens": tokens, "blocks": blocks, "corpus_tokens": tokens - 2 * blocks,
            "train_seconds": summary["train_seconds"], "wall_seconds": round(wall, 2),
            "tokens_per_second": round(tokens / summary["train_seconds"], 1),
            "precision": summary["precision"]["precision"], "final_train_loss": summary["final_loss"],
            "own_val_mlm_loss": round(own["val_mlm_loss"], 4), "own_val_mlm_acc": round(own["val_mlm_acc"], 4),
            "trained_lines": summary["corpus"]["kept"],
            "validation": score(model, tokenizer, held_out, args.seq_len)}


# -- Hugging Face ----------------------------------------------------------------------------------------------
def run_hf(corpus: Path, work: Path, settings: dict, held_out: list[str], args) -> dict:
    """run_mlm.py's recipe (without line_by_line), with the recipe's model and optimiser settings."""
    from itertools import chain

    from datasets import Dataset
    from transformers import (
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        set_seed,
    )

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(settings["tokenizer"])
    training, _ = split(read_lines(corpus), settings["validation_fraction"])
    block = args.seq_len

    def group_texts(examples):  # run_mlm.py's
        concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
        total = len(concatenated[list(examples.keys())[0]]) // block * block
        return {k: [t[i:i + block] for i in range(0, total, block)] for k, t in concatenated.items()}

    dataset = Dataset.from_dict({"text": training})
    dataset = dataset.map(lambda batch: tokenizer(batch["text"], return_special_tokens_mask=True), batched=True,
                          remove_columns=["text"])
    dataset = dataset.map(group_texts, batched=True)
    set_seed(settings["seed"])
    model = build_model(settings, tokenizer)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=0.15)
    special = set(tokenizer.all_special_ids)
    batches = []  # (real tokens, blocks, corpus tokens) of every batch the collator made

    def counted(features):  # the collator, counting what each batch holds (real = attention mask)
        batch = collator(features)
        batches.append((int(batch["attention_mask"].sum()), len(features),
                        sum(1 for f in features for i in f["input_ids"] if i not in special)))
        return batch

    class Clock(TrainerCallback):
        begin = end = None

        def on_train_begin(self, *a, **k):
            Clock.begin = time.perf_counter()

        def on_train_end(self, *a, **k):
            Clock.end = time.perf_counter()

    training_args = TrainingArguments(
        output_dir=str(work / "hf"), per_device_train_batch_size=settings["batch_size"],
        learning_rate=settings["lr"], weight_decay=settings["weight_decay"], warmup_steps=settings["warmup_steps"],
        lr_scheduler_type="linear", max_grad_norm=settings["max_grad_norm"], max_steps=args.steps,
        seed=settings["seed"], use_cpu=True, dataloader_num_workers=0, logging_steps=10, save_strategy="no",
        report_to="none")
    trainer = Trainer(model=model, args=training_args, train_dataset=dataset, data_collator=counted,
                      callbacks=[Clock()])
    output = trainer.train()
    wall = time.perf_counter() - start
    seconds = Clock.end - Clock.begin
    # The Trainer's loader reads one batch ahead: the batches trained on are the first global_step ones.
    steps = trainer.state.global_step
    counts = dict(zip(("tokens", "blocks", "corpus_tokens"), map(sum, zip(*batches[:steps], strict=True)), strict=True))
    logged = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    return {"steps": steps, **counts, "batches_read": len(batches), "train_seconds": round(seconds, 2),
            "wall_seconds": round(wall, 2), "tokens_per_second": round(counts["tokens"] / seconds, 1),
            "precision": "fp32", "final_train_loss": logged[-1] if logged else output.training_loss,
            "trained_lines": len(training), "blocks_available": len(dataset),
            "validation": score(model, tokenizer, held_out, args.seq_len)}


# -- driver ----------------------------------------------------------------------------------------------------
def run_side(side: str, corpus: Path, args) -> dict:
    import torch

    settings = recipe_settings(args)
    _, held_out = split(read_lines(corpus), settings["validation_fraction"])
    work = Path(tempfile.mkdtemp(prefix="cselab-bench-pretrain-"))
    load_before = os.getloadavg()
    try:
        result = (run_cselab if side == "cselab" else run_hf)(corpus, work, settings, held_out, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {**result, "threads": torch.get_num_threads(), "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()]}


def report(runs: list[dict], args, corpus_info: dict, load_start: tuple, recorded_machine: dict | None = None) -> None:
    """Write benchmarks/results/pretrain_speed.{json,md} from the runs so far. ``recorded_machine``:
    the machine description saved with the runs (``--render``), instead of this moment's."""
    by_side = {side: [r for r in runs if r["side"] == side] for side in ("cselab", "hf")}
    median = {side: statistics.median(r["tokens_per_second"] for r in rs) for side, rs in by_side.items() if rs}
    first = {side: rs[0] for side, rs in by_side.items() if rs}
    ratio = round(median["cselab"] / median["hf"], 3) if len(median) == 2 else None
    pairs = [round(c["tokens_per_second"] / h["tokens_per_second"], 3)
             for c, h in zip(by_side["cselab"], by_side["hf"], strict=False)]
    # Training is deterministic (fp32 on a CPU, same seed): every run of a side ends with the same
    # weights, so its first run's scores stand for all (the JSON keeps every run's).
    val = {side: r["validation"] for side, r in first.items()}
    layouts = ("cselab", "run_mlm")
    rows = []
    for side, label in (("cselab", "cselab (mlm-pretrain)"), ("hf", "HF run_mlm (Trainer + collator)")):
        if side not in first:
            continue
        r = first[side]
        rows.append([f"CPU: {label}", median[side], statistics.median(x["train_seconds"] for x in by_side[side]),
                     r["steps"], r["tokens"], r["corpus_tokens"], *(val[side][k]["loss"] for k in layouts),
                     *(val[side][k]["acc"] for k in layouts), r.get("own_val_mlm_loss", "-")])
    diff = {k: round(val["cselab"][k]["loss"] - val["hf"][k]["loss"], 4) for k in layouts} if len(val) == 2 else {}
    acc_diff = {k: round(val["cselab"][k]["acc"] - val["hf"][k]["acc"], 4) for k in layouts} if len(val) == 2 else {}
    if ratio is not None:
        rows.append(["CPU: ratio cselab / HF", ratio, "", "", "", "",
                     *(f"{diff[k]:+.4f} (cselab - HF)" for k in layouts),
                     *(f"{acc_diff[k]:+.4f} (cselab - HF)" for k in layouts), ""])
    blank = [""] * 9
    rows += [["GPU: cselab (mlm-pretrain)", "not measured", *blank],
             ["GPU: HF run_mlm (Trainer + collator)", "not measured", *blank],
             ["GPU: ratio cselab / HF", "not measured", *blank]]
    met = None
    if ratio is not None:
        met = ratio >= 1.5 and diff["cselab"] <= 0 and diff["run_mlm"] <= 0
    command = "python benchmarks/bench_pretrain.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items()
        if k in DEFAULTS and v != DEFAULTS[k])
    notes = [
        f"Command: `{command}`. Corpus: the first {corpus_info['lines']:,} lines of "
        f"{CORPUS.name}; cselab's split rule (data/split.py, fraction {corpus_info['validation_fraction']}) holds "
        f"out {corpus_info['held_out']} of them for validation, the rest ({corpus_info['trained']:,}) are both sides' "
        f"training lines. Model: the recipe's BERT (4 layers x 256, 4 heads, FFN 1024, bert-base-uncased vocabulary "
        f"from the minilm package), random init from seed {args.seed}; batch {args.batch_size} blocks x "
        f"{args.seq_len} tokens; AdamW lr {corpus_info['lr']}, weight decay {corpus_info['weight_decay']}, "
        f"{corpus_info['warmup_steps']} warm-up steps then linear decay, clipping 1.0; fp32 (cselab's "
        f"precision auto picked {first.get('cselab', {}).get('precision', '-')}); {args.steps} steps each, so each "
        f"side trained {first.get('cselab', {}).get('tokens', '-')} / {first.get('hf', {}).get('tokens', '-')} "
        "real tokens (cselab / HF; every block is full except possibly cselab's one short last block).",
        f"Order: {', '.join(r['side'] for r in runs)}, each in a fresh process; tokens/s is the median over the "
        f"{len(by_side['cselab'])} / {len(by_side['hf'])} runs of each side (per run: "
        f"{', '.join(str(r['tokens_per_second']) for r in runs)}); per-pair ratios {pairs}. tokens/s = real "
        "(non-pad, attention-mask) tokens / seconds of the training loop: "
        "cselab's `train_seconds` (summary.json: its log windows, from before the first batch to the last update; "
        "tokenising, model building, the matmul probe, evaluation and the checkpoint are outside); HF's "
        "`Trainer.train` from on_train_begin to on_train_end (tokenising with `datasets.map` and model building "
        "outside). Both include reading and masking the batches. 'corpus tokens' leaves out [CLS]/[SEP]: run_mlm "
        "frames every line, cselab every block, so HF's blocks carry fewer corpus tokens.",
        "Validation MLM loss and accuracy: both final models (cselab's from its last checkpoint: encoder and MLM "
        "head, loaded into a BertForMaskedLM) scored by one function of this script on the held-out lines, masked "
        "5 times with fixed seeds (15% of non-special tokens, 80/10/10), dropout off, in both block layouts: "
        "'cselab blocks' (ids end to end, [CLS] + 62 + [SEP]) and 'run_mlm blocks' (each line framed, cut every "
        "64). Means over every masked token. 'cselab own' is cselab's logged val_mlm_loss (its own masks) for "
        "reference. Each side's runs ended with identical weights (deterministic fp32 training): the scores are "
        "those of its first run.",
        "Differences left as each library does them: HF's Trainer exempts biases and LayerNorm weights from weight "
        "decay (cselab decays all); HF's warm-up starts at lr 0 (step/warmup), cselab's at (step+1)/warmup; the "
        "MLM head's dense layer is initialised by nn.Linear in cselab and N(0, 0.02) in HF; HF's model computes "
        "logits at every position, cselab's only at the masked ones.",
        ("Target (issue #22 item 8: >= 1.5x HF's tokens/s on the CPU at equal or lower validation loss): "
         + ("met." if met else "NOT met." if met is not None else "not evaluated (a side is missing).")
         + (f" Speed ratio {ratio}x; validation loss cselab - HF: {diff.get('cselab', 0):+.4f} (cselab blocks), "
            f"{diff.get('run_mlm', 0):+.4f} (run_mlm blocks); masked-token accuracy cselab - HF: "
            f"{acc_diff.get('cselab', 0):+.4f}, {acc_diff.get('run_mlm', 0):+.4f}"
            + (" (lower for cselab: the target names the loss, not the accuracy)"
               if min(acc_diff.values()) < 0 else "") + "." if ratio is not None else "")
         + " GPU: not measured (no GPU was lent to this run; GPU figures only from a GPU)."),
        f"Load averages (1, 5, 15 min): before the benchmark {[round(x, 2) for x in load_start]}; per run "
        + "; ".join(f"{r['side']} {r['load_before']} -> {r['load_after']}" for r in runs)
        + ". The figures during the runs include this benchmark's own two threads.",
    ]
    data = {"runs": runs, "ratio_tokens_per_second": ratio, "pair_ratios": pairs, "median_tokens_per_second": median,
            "val_loss_difference": diff, "val_acc_difference": acc_diff, "target_met": met,
            "settings": {**vars(args), **corpus_info}, "command": command, "load_average_start": list(load_start),
            "gpu": "not measured"}
    headers = ["side", "tokens/s", "train s", "steps", "tokens", "corpus tokens", "val MLM loss (cselab blocks)",
               "val MLM loss (run_mlm blocks)", "val MLM acc (cselab blocks)", "val MLM acc (run_mlm blocks)",
               "cselab own val loss"]
    title = "MLM pre-training: cselab vs Hugging Face run_mlm (Trainer + DataCollatorForLanguageModeling)"
    # --render keeps the machine line as it was when the runs ended
    write_results("pretrain_speed", data, title, headers, rows, "\n\n".join(notes), machine_info=recorded_machine)


def render(path: Path) -> None:
    """Rewrite the results from a saved pretrain_speed.json (its runs, settings and machine line):
    for a change to the report's layout, without training again."""
    saved = json.loads(path.read_text())
    settings = saved["settings"]
    args = argparse.Namespace(**{k: settings[k] for k in DEFAULTS})
    corpus_info = {k: settings[k] for k in ("lines", "trained", "held_out", "lr", "weight_decay", "warmup_steps",
                                            "validation_fraction")}
    report(saved["runs"], args, corpus_info, tuple(saved["load_average_start"]), recorded_machine=saved["machine"])


DEFAULTS = {"lines": 30000, "steps": 60, "repeats": 2, "batch_size": 64, "seq_len": 64, "seed": 42,
            "sides": "cselab,hf"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=DEFAULTS["lines"], help="first lines of the corpus to use")
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"], help="optimiser steps per side")
    parser.add_argument("--repeats", type=int, default=DEFAULTS["repeats"], help="runs per side (alternating)")
    parser.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    parser.add_argument("--seq-len", type=int, default=DEFAULTS["seq_len"])
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    parser.add_argument("--sides", default=DEFAULTS["sides"])
    parser.add_argument("--side-worker", help=argparse.SUPPRESS)
    parser.add_argument("--corpus-file", help=argparse.SUPPRESS)
    parser.add_argument("--render", metavar="JSON", help="rewrite the results from a saved pretrain_speed.json "
                                                          "(no training)")
    args = parser.parse_args()

    if args.render:
        render(Path(args.render))
        return

    if args.side_worker:
        print(json.dumps(run_side(args.side_worker, Path(args.corpus_file), args)))
        return
    load_start = os.getloadavg()
    source = require_shared() / CORPUS
    work = Path(tempfile.mkdtemp(prefix="cselab-bench-pretrain-corpus-"))
    try:
        corpus = work / f"lines-{args.lines}.txt"
        lines = write_corpus(source, args.lines, corpus)
        settings = recipe_settings(args)
        training, held_out = split(read_lines(corpus), settings["validation_fraction"])
        corpus_info = {"lines": lines, "trained": len(training), "held_out": len(held_out),
                       **{k: settings[k] for k in ("lr", "weight_decay", "warmup_steps", "validation_fraction")}}
        runs = []
        passed = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                  if k in DEFAULTS and k not in ("sides", "repeats")]
        for repeat in range(args.repeats):
            for side in args.sides.split(","):
                result = run_worker(__file__, "--side-worker", side, "--corpus-file", str(corpus), *passed)
                runs.append({"side": side, "repeat": repeat + 1, **result})
                print(side, repeat + 1, {k: v for k, v in result.items() if k != "validation"},
                      result["validation"], flush=True)
                report(runs, args, corpus_info, load_start)  # after every run: a long run leaves partial results
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
