"""What a run trains and on what, built from its config the same way at every start: corpus (and its
validation split), views, encoder, head, objective (its terms and token passes), step plan and data
loader. What changes as it trains is the run's state (``state.py``)."""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from cselab import citations
from cselab.config import Config, DataConfig, ModelConfig, TrainConfig, ViewsConfig
from cselab.data.collate import Collator
from cselab.data.corpus import CorpusError, CorpusStats
from cselab.data.indexed import read_corpus
from cselab.data.packing import PackedBlocks, PackedCollator, block_tokens
from cselab.data.plan import StepPlan
from cselab.data.split import LineSplit, count_held_out, hold_out, lines_of
from cselab.data.step_dataset import StepDataset
from cselab.data.token_cache import SentenceTokenizer, token_ids, tokenizer_fingerprint
from cselab.data.views import ViewBuilder
from cselab.data.wordpiece import WordPieceVocabulary, wordpiece_tokenizer
from cselab.errors import ConfigError
from cselab.losses import Objective, build_objective
from cselab.losses.base import TOKEN_PASSES, TokenBatch
from cselab.model.encoder import SentenceEncoder
from cselab.model.heads import build_head, init_like_backbone
from cselab.speed import speed_up
from cselab.speed.compile_auto import CompileWhenRepaid
from cselab.train.distributed import local_processes
from cselab.train.rank import RankContext
from cselab.train.signals import quiet_worker
from cselab.train.validation import validation_batches

log = logging.getLogger("cselab.train")


@dataclass
class TrainingSetup:
    corpus: Any  # what the plan's indices pick: training sentences, or token blocks when packed
    corpus_stats: CorpusStats
    encoder: SentenceEncoder
    head: torch.nn.Module
    objective: Objective  # its terms, and the token passes they read
    trainable: torch.nn.ModuleList  # [encoder, head, *terms, passes]: the checkpoint's layout
    plan: StepPlan
    collator: Collator | PackedCollator
    validation: list[TokenBatch] = field(default_factory=list)  # the held-out lines, masked once
    notes: list[str] = field(default_factory=list)  # lines for the run's output (a trained vocabulary)
    vocabulary_sha256: str | None = None  # a trained WordPiece vocabulary's fingerprint (checked on resume)
    compile_timer: CompileWhenRepaid | None = None  # train.compile: times the steps, compiles when it pays

    def announcements(self) -> list[str]:
        """What the run's output says of its setup before training: the corpus as read, a trained vocabulary."""
        return [note for note in [*self.corpus_stats.notes(), *self.notes] if note]


def build_setup(config: Config, device: torch.device, processes: int = 1, rank: int = 0) -> TrainingSetup:
    corpus, stats = read_corpus(config.data.corpus, config.data.column, config.data.max_sentences,
                                seed=config.train.seed)
    split = hold_out(len(corpus), config.data.validation_fraction)
    count_held_out(stats, split)
    log.info("corpus: %s", stats.summary())
    training_lines = lines_of(corpus, split.train)
    views = ViewBuilder(config.views, training_lines, config.train.seed)
    vocabulary = corpus_vocabulary(config.model, training_lines, rank)
    encoder = build_encoder(config.model, None if vocabulary is None else vocabulary.tokenizer)
    trained_vocabulary = None if vocabulary is None else tokenizer_fingerprint(vocabulary.tokenizer)  # as trained
    added = encoder.add_special_tokens(views.special_tokens)  # before the optimizer: the vocabulary grows
    if added:
        log.info("added to the vocabulary: %s", ", ".join(added))
    views.use_tokenizer(encoder.tokenizer)  # token-level augmenters (CLEAR's) count the encoder's own tokens
    head = build_head(config.model.projection, encoder.hidden_size, **config.model.projection_params)
    if config.model.head_init == "bert":
        init_like_backbone(head, encoder.backbone)
    objective = build_objective(config.objective, term_context(encoder, head, config.views))
    check_views_for(objective, config.views)
    for token_pass in objective.passes.values():
        token_pass.setup(encoder, None if config.model.from_config is not None else config.model.name_or_path)
    if not objective.encodes_views:  # MLM alone never runs them: frozen, as DDP stops on a parameter without gradient
        for unused in (encoder.mlp, head):
            if unused is not None:
                unused.requires_grad_(False)
    # The papers of the recipe's methods, for the saved model's card.
    methods = [*objective.terms, views.anchor, views.positive, views.negative, *views.labelers]
    encoder.citation = citations.collect(methods, dropout_view=views.positive is None and objective.encodes_views)
    trainable = torch.nn.ModuleList([encoder, head, *objective.terms, objective.passes]).to(device)
    compile_timer = speed_up(encoder, config.train, config.model, device)
    preparers = {name: token_pass.preparer(encoder.tokenizer) for name, token_pass in objective.passes.items()}
    if config.data.packing:
        check_packing(objective, encoder, config, stats)
        items, held_out = pack(corpus, split, encoder, config)
        collator = PackedCollator(encoder.tokenizer, preparers, config.train.seed, rank)
    else:
        items, held_out = training_lines, lines_of(corpus, split.validation)
        collator = Collator(encoder.tokenize, views, objective.encodes_views, preparers, rank,
                            reads=objective.needs | objective.wants,
                            cached=sentence_tokenizer(items, encoder, config.data))
    validation = validation_batches(collator, held_out, config.optim.batch_size) if "masked" in objective.passes else []
    return TrainingSetup(items, stats, encoder, head, objective, trainable, plan_steps(items, config, processes),
                         collator, validation, [] if vocabulary is None else [vocabulary.note()], trained_vocabulary,
                         compile_timer)


def pack(corpus, split: LineSplit, encoder: SentenceEncoder, config: Config) -> tuple[PackedBlocks, PackedBlocks]:
    """Token blocks of the training lines and of the held-out lines (the whole corpus tokenised once,
    cached)."""
    tokens = token_ids(corpus, encoder.tokenizer)
    size, documents = block_tokens(encoder.tokenizer, config.model.max_seq_len), config.data.document_boundaries
    training = PackedBlocks(tokens, split.train, size, documents=documents == "blank_lines")
    if len(training) < 2:
        raise CorpusError(f"{config.data.corpus}: packing made {len(training)} block of {size} tokens; needs 2")
    held_out = PackedBlocks(tokens, split.validation, size, documents=documents == "blank_lines")
    return training, held_out


def check_packing(objective: Objective, encoder: SentenceEncoder, config: Config, stats: CorpusStats) -> None:
    """Packed blocks are token passes' input only, fit the model's positions, and keep documents whole."""
    if objective.encodes_views:
        others = [name for name, term in zip(objective.names, objective.terms, strict=True)
                  if term.needs - set(TOKEN_PASSES)]
        raise ConfigError(f"data.packing: packs token blocks for MLM alone; {', '.join(others)} read sentence views "
                          f"(set data.packing: false)")
    positions = getattr(encoder.backbone.config, "max_position_embeddings", None)
    if positions is not None and config.model.max_seq_len > positions:
        raise ConfigError(f"model.max_seq_len: {config.model.max_seq_len} tokens per packed block; the model has "
                          f"{positions} positions")
    if config.data.document_boundaries == "blank_lines" and stats.skipped.get("over_max_sentences"):
        raise ConfigError("data.document_boundaries: blank_lines needs whole documents; data.max_sentences samples "
                          "lines out of them (set data.max_sentences: null)")


def corpus_vocabulary(model: ModelConfig, training_lines, rank: int = 0) -> WordPieceVocabulary | None:
    """With ``model.wordpiece_vocab_size``: a WordPiece vocabulary trained on the training lines only
    (never the held-out ones), cached (data/wordpiece.py); None otherwise."""
    size = model.wordpiece_vocab_size
    if size is None:
        return None
    positions = (model.from_config or {}).get("max_position_embeddings")
    positions = positions if isinstance(positions, int) and not isinstance(positions, bool) and positions > 0 else 512
    return wordpiece_tokenizer(training_lines, size, model_max_length=positions, progress=rank == 0)


def sentence_tokenizer(lines: Sequence[str], encoder: SentenceEncoder, data: DataConfig) -> SentenceTokenizer | None:
    """Cached ids for the training lines (data.cache_token_ids), where they rebuild the tokenizer's
    batches exactly."""
    if not data.cache_token_ids:
        return None
    if not SentenceTokenizer.fits(encoder.tokenizer):
        log.warning("data.cache_token_ids: %s pads or truncates on the left, has no pad token or gives "
                    "non-zero segment ids; each step's rows are tokenised at the step instead",
                    type(encoder.tokenizer).__name__)
        return None
    return SentenceTokenizer(encoder.tokenizer, encoder.max_seq_len, token_ids(lines, encoder.tokenizer))


def build_encoder(m: ModelConfig, tokenizer=None) -> SentenceEncoder:
    """The encoder the config names; ``tokenizer``: one built for a new encoder (model.from_config)."""
    mlp = None if m.mlp == "auto" else m.mlp == "true"
    if m.from_config is not None:
        pooler = "cls" if m.pooler == "auto" else m.pooler
        return SentenceEncoder.from_config(m.from_config, m.name_or_path, pooler=pooler, mlp=mlp,
                                           mlp_only_train=m.mlp_only_train, max_seq_len=m.max_seq_len,
                                           tokenizer=tokenizer, head_init=m.head_init)
    return SentenceEncoder.from_pretrained(m.name_or_path, pooler=m.pooler, mlp=m.mlp,
                                           mlp_only_train=m.mlp_only_train, max_seq_len=m.max_seq_len,
                                           trust_remote_code=m.trust_remote_code, head_init=m.head_init)


def term_context(encoder: SentenceEncoder, head: torch.nn.Module, views: ViewsConfig) -> dict:
    """What a term may need to build its own parameters, known before step 1."""
    with torch.no_grad():
        was_training = head.training
        head.eval()
        embedding_size = head(torch.zeros(2, encoder.hidden_size)).shape[-1]
        head.train(was_training)
    backbone_config = encoder.backbone.config
    return {"embedding_size": embedding_size, "hidden_size": encoder.hidden_size,
            "vocab_size": len(encoder.tokenizer), "model_type": backbone_config.model_type,
            "hidden_act": getattr(backbone_config, "hidden_act", None),
            "layer_norm_eps": getattr(backbone_config, "layer_norm_eps", None),
            "num_labels": len(views.label) + 1 if views.label else None,
            "projected": not isinstance(head, torch.nn.Identity)}


def check_views_for(objective: Objective, views: ViewsConfig) -> None:
    """A term that reads label views needs ``views.label``, and its num_labels must fit that list."""
    labels = len(views.label)
    for i, (name, term) in enumerate(zip(objective.names, objective.terms, strict=True)):
        if term.needs & {"label_view", "labels"} and not labels:
            raise ConfigError(f"objective[{i}] ({name}): reads label views; set views.label, a list of augmenters")
        num_labels = term.num_labels
        if labels and num_labels is not None and num_labels != labels + 1:
            raise ConfigError(f"objective[{i}].num_labels: {num_labels} must be len(views.label) + 1 = {labels + 1}")


def plan_steps(corpus, config: Config, processes: int = 1) -> StepPlan:
    """Every step of the run; with P processes a step is P x batch_size sentences (global batch)."""
    grouping = config.data.length_grouping
    lengths = None
    if grouping > 1:
        lengths = corpus.approximate_lengths() if hasattr(corpus, "approximate_lengths") else [len(s) for s in corpus]
    plan = StepPlan(len(corpus), config.optim.batch_size * processes, config.optim.epochs, config.train.seed,
                    config.optim.max_steps, lengths=lengths, length_grouping=grouping, drop_last=processes > 1)
    if not plan.steps_per_epoch:  # only with several processes (whole global batches) on a tiny corpus
        raise ConfigError(f"data.corpus: {len(corpus)} sentences do not fill one global batch of "
                          f"{config.optim.batch_size} x {processes} processes; lower optim.batch_size")
    return plan


# Auto never starts more: each worker holds its own copy of the augmenters (spaCy pipelines,
# translation models) and prefetches its own batches, so memory grows with the count.
MAX_AUTO_WORKERS = 8


def loader_workers(train: TrainConfig, device: torch.device) -> int:
    """``train.num_workers``, or for null (auto): on a GPU, this process's share of the cores it may
    run on (its CPU affinity divided among the run's processes on this machine), less one for the
    training loop itself, at least 1 and at most ``MAX_AUTO_WORKERS``; on a CPU none (workers would
    take cores from the matmuls)."""
    if train.num_workers is not None:
        return train.num_workers
    if device.type != "cuda":
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_AUTO_WORKERS, cores // local_processes() - 1))


def make_loader(setup: TrainingSetup, train: TrainConfig, start_step: int,
                process: RankContext) -> torch.utils.data.DataLoader:
    """Batches from step ``start_step`` on: this process's share of each step of the plan."""
    device, workers = process.device, loader_workers(train, process.device)
    log.info("data loader: %d worker processes", workers)
    return torch.utils.data.DataLoader(
        StepDataset(setup.corpus, setup.plan, start_step, process.rank, process.processes), batch_size=None,
        shuffle=False,
        collate_fn=setup.collator, num_workers=workers, persistent_workers=False, worker_init_fn=quiet_worker,
        pin_memory=device.type == "cuda", prefetch_factor=4 if workers else None,
        # Its own generator: starting the loader must not draw from the restored dropout RNG.
        generator=torch.Generator().manual_seed(train.seed))
