"""DiffCSE: the ``replaced`` token pass (conditional replaced-token detection) and the ``rtd`` term.

Chuang et al., "DiffCSE: Difference-based Contrastive Learning for Sentence Embeddings", NAACL 2022:
L = L_contrast + λ · L_RTD. The contrastive part is SimCSE's (the ``infonce`` term); this file adds the
second. Each step sentence x is masked (BERT's 80/10/10 at ``mask_ratio``); a frozen masked language
model, the generator G, fills every position in: x'' = argmax G(mask(x)). A discriminator D, conditioned
on the sentence vector h = f(x), predicts for every token whether x''_t differs from x_t:

    L_RTD = Σ_t CE(D(x'', h)_t, 1[x''_t ≠ x_t])      (a 2-class cross-entropy per token, averaged)

As the authors' code (voidism/DiffCSE @ f724b2c; file:line below) does it:

* every encoded row is masked on its own (``train.py:499``: the collator masks the flattened
  (batch x 2) rows): with dropout positives each sentence is encoded twice, so it is masked twice,
  and row i of the pass is conditioned on row i's own vector (the anchor's or the positive's);
* G is ``distilbert-base-uncased`` (``run_diffcse.sh:9``), frozen (``torch.no_grad``), its argmax
  taken at **every** position, not only the masked ones, position 0 set back to [CLS], the labels
  compared with the original ids on real tokens (``models.py:183-187``); G runs in train mode, its
  dropout on (a submodule of the trained model, ``models.py:122``);
* D is a second copy of the pre-trained encoder (``train.py:385-388``) plus ``Linear(h, 2)``
  (``train.py:387``), both trained; h is the projector's output, **not detached** (RTD trains the
  encoder too), and it replaces position 0 of D's embedding output after the embeddings' LayerNorm
  and dropout (the patched ``modeling_bert.py:960-961``);
* the loss is the cross-entropy of D's two logits (``models.py:264, 272``), weighted by λ
  (``lambda_weight``, ``models.py:273``; 0.005 in ``run_diffcse.sh:5``).

Here: the collator masks the step's original sentences twice (rows: first copies, then second
copies, aligned with ``inputs.anchor`` then ``inputs.positive``) with ``masking.py``'s BERT masking;
the pass copies the encoder's backbone in ``setup`` (its weights at the start of the run), runs G, and
runs D with a forward hook on its embeddings module that puts h at position 0. The term averages
the cross-entropy over real tokens; ``pad_positions: true`` averages over every padded position, pads
included, as the authors' ``CrossEntropyLoss`` over the padded batch does. docs/methods.md lists the
other differences and why.
"""
from __future__ import annotations

import copy
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import torch
import torch.nn.functional as F
from torch import nn

from cselab import citations
from cselab.errors import ConfigError, ModelLoadError, first_line
from cselab.losses.base import LOSSES, LossInputs, LossTerm, TokenBatch, TokenPass, register_token_pass
from cselab.losses.masking import MlmMasking

log = logging.getLogger(__name__)

#: The paper's generator for BERT-base uncased (``run_diffcse.sh:9``); RoBERTa's is distilroberta-base.
DEFAULT_GENERATOR = "distilbert-base-uncased"
#: What a generator that cannot be loaded is replaced by (the line an offline run stops with).
GENERATOR_INSTEAD = ("a local masked-language model directory with the encoder's vocabulary (a Hugging Face "
                     "*ForMaskedLM checkpoint, or the output of `cselab pretrain` from the encoder's tokenizer)")
#: The features key of the ids before masking, the labels' reference.
ORIGINAL_IDS = "original_input_ids"


class TwiceMasked:
    """The collator side of the ``replaced`` pass (picklable: it runs in the loader's workers): each
    sentence twice, rows [first copies; second copies] aligned with the step's anchor and positive rows,
    each row masked on its own with BERT's 80/10/10 at ``mask_ratio`` (special tokens and padding
    never); the ids before masking ride along under ``ORIGINAL_IDS``."""

    def __init__(self, tokenizer, mask_ratio: float):
        self.masking = MlmMasking(tokenizer, probability=mask_ratio)

    def __call__(self, features: dict[str, torch.Tensor], seed: int) -> TokenBatch:
        doubled = {key: torch.cat([value, value]) for key, value in features.items()}
        tokens = self.masking(doubled, seed)
        tokens.features[ORIGINAL_IDS] = doubled["input_ids"]
        return tokens


@dataclass
class ReplacedTokens:
    """The ``replaced`` pass of a step, rows = this process's anchor rows, then its positive rows.

    logits: (R, L, 2) the discriminator's scores at every position (1 = replaced);
    labels: (R, L) 1 where the generator's token is not the original one, on real tokens; 0 elsewhere
    (position 0 and padding included);
    attention: (R, L) the attention mask (1 = a real token).
    """

    logits: torch.Tensor
    labels: torch.Tensor
    attention: torch.Tensor


class FrozenModel:
    """A model a pass runs but never trains or saves: not an ``nn.Module`` attribute, so it is outside
    the run's module tree (no parameters for the optimizer, no tensors in a checkpoint or the saved
    model, no ``train()``/``eval()`` from the loop); the pass moves it with itself (``_apply``)."""

    def __init__(self, model: nn.Module):
        self.model = model


def load_generator(name: str) -> tuple[nn.Module, object]:
    """(masked language model, tokenizer) of ``name``, a directory or a Hub name: a Hugging Face
    ``*ForMaskedLM`` checkpoint, or a cselab raw encoder (``cselab pretrain``) whose MLM head is in
    ``mlm_head.safetensors``. Safetensors only; a model without MLM head weights is refused (a head at
    random would make the labels noise)."""
    from safetensors.torch import load_file
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from cselab.model.encoder import quiet_transformers
    from cselab.model.files import refuse_pickled_weights
    from cselab.model.mlm_head import MLM_HEAD_FILE
    from cselab.sources import resolve_model_path

    resolved = Path(resolve_model_path(name))
    refuse_pickled_weights(resolved)
    try:
        with quiet_transformers():  # a cselab raw encoder's head is loaded below, not worth a load report
            tokenizer = AutoTokenizer.from_pretrained(str(resolved))
            model, info = AutoModelForMaskedLM.from_pretrained(str(resolved), use_safetensors=True,
                                                               output_loading_info=True)
    except Exception as exc:  # whatever the files make transformers raise: the files' fault
        raise ModelLoadError(f"{name}: cannot load a masked language model as the rtd generator "
                             f"({first_line(exc)[:300]}); pass {GENERATOR_INSTEAD}") from None
    state = model.state_dict()
    missing = {key for key in info["missing_keys"] if key in state}
    if missing and (resolved / MLM_HEAD_FILE).is_file():
        head = load_file(str(resolved / MLM_HEAD_FILE))
        model.load_state_dict(head, strict=False)
        loaded = {state[key].data_ptr() for key in head if key in state}  # tied names share storage
        missing = {key for key in missing if state[key].data_ptr() not in loaded}
    if missing:
        raise ConfigError(f"{name}: has no weights for {', '.join(sorted(missing)[:3])} (the rtd generator must be "
                          f"a trained masked language model: pass {GENERATOR_INSTEAD})")
    return model.float(), tokenizer


def vocabulary_problem(generator_tokenizer, generator: nn.Module, tokenizer) -> str | None:
    """Why the generator cannot read the encoder's token ids (None: same tokens, same ids, same size)."""
    own, theirs = tokenizer.get_vocab(), generator_tokenizer.get_vocab()
    size = generator.get_output_embeddings().weight.shape[0]
    if len(own) != len(theirs):
        return f"{len(theirs)} tokens, the encoder's tokenizer {len(own)}"
    differing = next((token for token, index in own.items() if theirs.get(token) != index), None)
    if differing is not None:
        return f"{differing!r} is id {theirs.get(differing)} there, {own[differing]} in the encoder's tokenizer"
    if size < len(own):
        return f"its MLM head predicts {size} ids, the encoder's tokenizer has {len(own)}"
    return None


def condition_on(sentence: torch.Tensor, module: nn.Module, args, output: torch.Tensor) -> torch.Tensor:
    """A forward hook on the discriminator's embeddings: position 0 of their output (after LayerNorm and
    dropout) becomes each row's sentence vector (the patched ``modeling_bert.py:960-961``)."""
    return torch.cat([sentence.unsqueeze(1).to(output.dtype), output[:, 1:]], dim=1)


@register_token_pass("replaced", "DiffCSE: each sentence masked twice, filled in by a frozen MLM generator, "
                                 "through a discriminator conditioned on the sentence vector")
class ReplacedTokensPass(TokenPass):
    """Parameters (the ``rtd`` term gives them): ``mask_ratio``, the share of tokens masked (BERT's
    80/10/10); ``generator``, the frozen MLM (directory or Hub name); ``generator_dropout``, whether the
    generator runs with its dropout on (the authors' code) or off (its predictions a function of the
    masked sentence alone)."""

    def __init__(self, mask_ratio: float = 0.3, generator: str = DEFAULT_GENERATOR, generator_dropout: bool = True):
        super().__init__()
        self.mask_ratio, self.generator_name, self.generator_dropout = mask_ratio, generator, generator_dropout
        self.discriminator: nn.Module | None = None  # a copy of the encoder's backbone (setup)
        self.classifier: nn.Linear | None = None  # its per-token head: original (0) or replaced (1)
        self.generator: FrozenModel | None = None
        self.pad_id = 0

    def preparer(self, tokenizer) -> TwiceMasked:
        return TwiceMasked(tokenizer, self.mask_ratio)

    def setup(self, encoder: nn.Module, source: str | None) -> None:
        """The discriminator (a copy of the backbone as the run starts: the pre-trained weights, before the
        speed-ups change the encoder's modules) with its head, and the frozen generator, whose vocabulary
        must be the encoder's."""
        from cselab.model.masks import use_sync_free_masks

        self.discriminator = copy.deepcopy(encoder.backbone)
        if not isinstance(getattr(self.discriminator, "embeddings", None), nn.Module):
            raise ConfigError(f"rtd: {type(self.discriminator).__name__} has no `embeddings` module, whose output's "
                              f"position 0 the discriminator replaces by the sentence vector (BERT-like models)")
        self.classifier = nn.Linear(encoder.hidden_size, 2)
        pad = encoder.tokenizer.pad_token_id
        self.pad_id = 0 if pad is None else pad
        generator, generator_tokenizer = load_generator(self.generator_name)
        problem = vocabulary_problem(generator_tokenizer, generator, encoder.tokenizer)
        if problem:
            raise ConfigError(f"rtd generator {self.generator_name!r}: its vocabulary is not the encoder's "
                              f"({problem}); the generator reads the encoder's token ids: set the rtd term's "
                              f"generator to a masked language model with the encoder's tokenizer")
        use_sync_free_masks(generator)  # no read-back of the batch in its forward (model/masks.py)
        generator.requires_grad_(False)
        generator.train(self.generator_dropout)
        self.generator = FrozenModel(generator)
        log.info("rtd: generator %s (dropout %s), discriminator a copy of the encoder", self.generator_name,
                 "on" if self.generator_dropout else "off")

    def _apply(self, fn, recurse: bool = True):
        # .to(device) (and .float(), .half()...) reach the generator too; parameters() and state_dict() never do.
        super()._apply(fn, recurse)
        if self.generator is not None:
            self.generator.model._apply(fn)
        return self

    def forward(self, tokens: TokenBatch, encoder: nn.Module, inputs: LossInputs) -> ReplacedTokens:
        features = tokens.features
        ids, attention, original = features["input_ids"], features["attention_mask"], features[ORIGINAL_IDS]
        sentence = torch.cat([inputs.anchor, inputs.positive])
        if sentence.shape[0] != ids.shape[0]:
            raise ValueError(f"rtd: {ids.shape[0]} masked rows for {sentence.shape[0]} sentence vectors; the pass "
                             f"masks each sentence once per view (anchor, positive)")
        with torch.no_grad():
            predicted = self.generator.model(input_ids=ids, attention_mask=attention).logits.argmax(-1)
        predicted[:, 0] = original[:, 0]  # [CLS] stays (models.py:185)
        real = attention.bool()
        labels = ((predicted != original) & real).long()
        edited = predicted.masked_fill(~real, self.pad_id)
        segments = {"token_type_ids": features["token_type_ids"]} if "token_type_ids" in features else {}
        hook = self.discriminator.embeddings.register_forward_hook(functools.partial(condition_on, sentence))
        try:
            states = self.discriminator(input_ids=edited, attention_mask=attention, **segments,
                                        return_dict=True).last_hidden_state
        finally:
            hook.remove()
        return ReplacedTokens(logits=self.classifier(states), labels=labels, attention=attention)


@LOSSES.register("rtd", "DiffCSE's conditional replaced-token detection: a frozen MLM generator edits each "
                        "masked sentence, a discriminator conditioned on its vector finds the edits")
class ReplacedTokenDetectionLoss(LossTerm):
    """The 2-class cross-entropy of the ``replaced`` pass's discriminator against its labels, averaged
    over real tokens (``pad_positions: false``) or over every padded position (``true``: the authors'
    ``CrossEntropyLoss`` over the padded batch, whose weight on real tokens shrinks as padding grows).
    Logs: ``loss``, ``acc`` (real tokens classified right), ``replaced`` (share of real tokens the
    generator changed), ``replaced_acc`` (share of those the discriminator found)."""

    citation = citations.DIFFCSE
    needs = frozenset({"anchor", "positive", "replaced"})
    models = MappingProxyType({"generator": GENERATOR_INSTEAD})

    def __init__(self, mask_ratio: float = 0.3, generator: str = DEFAULT_GENERATOR, generator_dropout: bool = True,
                 pad_positions: bool = False, embedding_size: int | None = None, hidden_size: int | None = None):
        super().__init__()
        if not 0 < mask_ratio < 1:
            raise ValueError("mask_ratio must be in (0, 1)")
        if not generator.strip():
            raise ValueError(f"generator: names a masked language model; pass {GENERATOR_INSTEAD}")
        if embedding_size is not None and hidden_size is not None and embedding_size != hidden_size:
            raise ConfigError(f"model.projection: rtd gives the discriminator the sentence vector after the projection "
                              f"({embedding_size} wide) in place of its {hidden_size}-wide first token embedding; use "
                              f"a projection that keeps the hidden size (diffcse_mlp without output_size, or none)")
        self.pad_positions = pad_positions
        self.token_passes = {"replaced": {"mask_ratio": mask_ratio, "generator": generator,
                                          "generator_dropout": generator_dropout}}

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        replaced: ReplacedTokens | None = inputs.replaced
        if replaced is None:
            raise ValueError("rtd: the step provided no replaced tokens (the training loop runs the pass for it)")
        logits, labels = replaced.logits.float().reshape(-1, 2), replaced.labels.reshape(-1)
        per_token = F.cross_entropy(logits, labels, reduction="none")
        real = replaced.attention.reshape(-1).to(per_token.dtype)
        real_count = real.sum().clamp(min=1)
        loss = per_token.mean() if self.pad_positions else (per_token * real).sum() / real_count
        right = (logits.detach().argmax(-1) == labels).to(real.dtype)
        changed = labels.to(real.dtype) * real
        return loss, {"loss": loss.detach(), "acc": (right * real).sum() / real_count,
                      "replaced": changed.sum() / real_count,
                      "replaced_acc": (right * changed).sum() / changed.sum().clamp(min=1)}
