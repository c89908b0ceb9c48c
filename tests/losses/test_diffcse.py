"""DiffCSE's ``replaced`` pass and ``rtd`` term (losses/diffcse.py) against hand computations and the
authors' code (voidism/DiffCSE @ f724b2c, diffcse/models.py:183-187 and 259-273, modeling_bert.py:960-961):
each sentence masked twice, the labels of a crafted example, the discriminator conditioned on h at position
0 of its first layer's input, gradients to h and the discriminator but never the generator, which is no
part of the module tree, the loss as a hand cross-entropy, and the checks on the generator."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cselab.config import ConfigError, load_config
from cselab.losses import LOSSES, build_objective
from cselab.losses.base import LossInputs, TokenBatch
from cselab.losses.diffcse import (
    ORIGINAL_IDS,
    FrozenModel,
    ReplacedTokens,
    ReplacedTokensPass,
    TwiceMasked,
    load_generator,
)
from tests.conftest import TINY_BERT, save_tiny_generator


@pytest.fixture
def generator_dir(tmp_path):
    return save_tiny_generator(tmp_path / "generator")


@pytest.fixture
def rtd_pass(tiny_encoder, generator_dir):
    token_pass = ReplacedTokensPass(mask_ratio=0.3, generator=str(generator_dir))
    token_pass.setup(tiny_encoder, None)
    return token_pass


class FixedPredictions(nn.Module):
    """A generator stub whose argmax at every position is ``predicted`` (the hand-made example's)."""

    def __init__(self, predicted: torch.Tensor, vocab_size: int):
        super().__init__()
        self.predicted, self.vocab_size = predicted, vocab_size
        self.seen: list[torch.Tensor] = []

    def forward(self, input_ids, attention_mask):
        self.seen.append(input_ids.clone())
        return SimpleNamespace(logits=F.one_hot(self.predicted, self.vocab_size).float())


def ids_of(tokenizer, *tokens: str) -> list[int]:
    return tokenizer.convert_tokens_to_ids(list(tokens))


def crafted_tokens(tokenizer) -> tuple[TokenBatch, torch.Tensor]:
    """Two rows, the same sentence "[CLS] cat sees the dog [SEP] [PAD]" (anchor row, positive row), masked
    by hand, and what the generator predicts at every position."""
    pad = tokenizer.pad_token
    original = torch.tensor([ids_of(tokenizer, "[CLS]", "cat", "sees", "the", "dog", "[SEP]", pad)] * 2)
    masked = torch.tensor([ids_of(tokenizer, "[CLS]", "[MASK]", "sees", "the", "[MASK]", "[SEP]", pad),
                           ids_of(tokenizer, "[CLS]", "cat", "[MASK]", "the", "dog", "[SEP]", pad)])
    attention = torch.tensor([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0]])
    # Row 0: position 0 predicted "the" (forced back to [CLS]); "cat" masked and restored; "sees" unmasked and
    # kept; "the" unmasked but changed to "a"; "dog" masked and filled in as "cat"; [SEP] predicted as "."; the
    # pad predicted as "dog". Row 1: every prediction is the original, except the masked "sees" -> "likes".
    predicted = torch.tensor([ids_of(tokenizer, "the", "cat", "sees", "a", "cat", ".", "dog"),
                              ids_of(tokenizer, "[CLS]", "cat", "likes", "the", "dog", "[SEP]", "the")])
    features = {"input_ids": masked, "attention_mask": attention, "token_type_ids": torch.zeros_like(masked),
                ORIGINAL_IDS: original}
    return TokenBatch(features, torch.tensor([1, 4, 9]), original.reshape(-1)[[1, 4, 9]]), predicted


def sentence_vectors(rows: int, size: int, seed: int = 0) -> tuple[torch.Tensor, LossInputs]:
    h = torch.randn(rows, size, generator=torch.Generator().manual_seed(seed)).requires_grad_(True)
    half = rows // 2
    return h, LossInputs(anchor=h[:half], positive=h[half:])


def test_each_sentence_is_masked_twice_independently_bert_style_and_keeps_its_original_ids(tiny_encoder):
    tokenizer = tiny_encoder.tokenizer
    sentences = [f"the old teacher number {i} carries a long heavy letter slowly to the garden" for i in range(64)]
    features = dict(tiny_encoder.tokenize(sentences))
    tokens = TwiceMasked(tokenizer, 0.3)(features, seed=11)
    ids, original = tokens.features["input_ids"], tokens.features[ORIGINAL_IDS]
    # Rows: [first copies; second copies], aligned with the anchor rows then the positive rows.
    assert torch.equal(original, torch.cat([features["input_ids"]] * 2))
    assert torch.equal(tokens.features["attention_mask"], torch.cat([features["attention_mask"]] * 2))
    # Each copy has a mask of its own.
    assert not torch.equal(ids[:64], ids[64:])
    special = torch.isin(original, torch.tensor(tokenizer.all_special_ids)) | (tokens.features["attention_mask"] == 0)
    assert torch.equal(ids[special], original[special])  # [CLS], [SEP], padding: never masked
    selected = torch.zeros(ids.numel(), dtype=torch.bool)
    selected[tokens.positions] = True
    selected = selected.view_as(ids)
    assert torch.equal(tokens.labels, original.reshape(-1)[tokens.positions])
    assert selected.sum().item() / (~special).sum().item() == pytest.approx(0.30, abs=0.03)
    as_mask = (ids[selected] == tokenizer.mask_token_id).float().mean().item()
    assert as_mask == pytest.approx(0.8, abs=0.05)
    assert torch.equal(ids[~selected], original[~selected])
    # The step's seed decides the masks (a resumed run masks as the uninterrupted one).
    again = TwiceMasked(tokenizer, 0.3)(features, seed=11)
    assert torch.equal(again.features["input_ids"], ids)
    assert not torch.equal(TwiceMasked(tokenizer, 0.3)(features, seed=12).features["input_ids"], ids)


def test_labels_of_a_crafted_example_and_the_edited_sentence_the_discriminator_reads(rtd_pass, tiny_encoder):
    tokenizer = tiny_encoder.tokenizer
    tokens, predicted = crafted_tokens(tokenizer)
    stub = FixedPredictions(predicted, len(tokenizer))
    rtd_pass.generator = FrozenModel(stub)
    read = []
    hook = rtd_pass.discriminator.register_forward_pre_hook(lambda module, args, kwargs: read.append(kwargs),
                                                            with_kwargs=True)
    _, inputs = sentence_vectors(2, TINY_BERT["hidden_size"])
    out = rtd_pass(tokens, tiny_encoder, inputs)
    hook.remove()
    # The generator read the masked rows.
    assert torch.equal(stub.seen[0], tokens.features["input_ids"])
    # Position 0 -> 0 (forced back to [CLS]); a masked token restored -> 0; an unmasked one kept -> 0; an unmasked
    # one changed -> 1; a masked one filled in wrong -> 1; [SEP] changed -> 1 (every position counts, as the
    # authors' code); padding -> 0 whatever was predicted there.
    assert out.labels.tolist() == [[0, 0, 0, 1, 1, 1, 0], [0, 0, 1, 0, 0, 0, 0]]
    assert torch.equal(out.attention, tokens.features["attention_mask"])
    # The discriminator reads the generator's sentence, [CLS] first and padding as the pad id.
    cls, pad = tokenizer.cls_token_id, tokenizer.pad_token_id
    expected = predicted.clone()
    expected[:, 0] = cls
    expected[:, -1] = pad
    assert torch.equal(read[0]["input_ids"], expected)
    assert torch.equal(read[0]["token_type_ids"], tokens.features["token_type_ids"])
    assert out.logits.shape == (2, 7, 2)


def test_labels_and_edited_ids_match_the_authors_code(rtd_pass, tiny_encoder):
    """diffcse/models.py:184-187 on random rows: g_pred[:, 0] = cls; replaced = (g_pred != input_ids) *
    attention_mask; e_inputs = g_pred * attention_mask (BERT's pad id is 0)."""
    generator = torch.Generator().manual_seed(3)
    original = torch.randint(1000, 1010, (6, 9), generator=generator)
    original[:, 0] = tiny_encoder.tokenizer.cls_token_id
    attention = (torch.arange(9) < torch.tensor([[9], [5], [7], [3], [9], [6]])).long()
    original = original * attention
    predicted = torch.randint(1000, 1010, (6, 9), generator=generator)
    features = {"input_ids": original.clone(), "attention_mask": attention, ORIGINAL_IDS: original}
    rtd_pass.generator = FrozenModel(FixedPredictions(predicted, len(tiny_encoder.tokenizer)))
    read = []
    hook = rtd_pass.discriminator.register_forward_pre_hook(lambda module, args, kwargs: read.append(kwargs),
                                                            with_kwargs=True)
    out = rtd_pass(TokenBatch(features, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)),
                   tiny_encoder, sentence_vectors(6, TINY_BERT["hidden_size"])[1])
    hook.remove()
    g_pred = predicted.clone()
    g_pred[:, 0] = 101
    assert torch.equal(out.labels, (g_pred != original) * attention)
    assert torch.equal(read[0]["input_ids"], g_pred * attention)


def test_the_discriminators_first_layer_reads_h_at_position_0_and_its_own_embeddings_elsewhere(rtd_pass,
                                                                                                tiny_encoder):
    rtd_pass.eval()  # no dropout: the embeddings' output can be recomputed exactly
    tokens, predicted = crafted_tokens(tiny_encoder.tokenizer)
    rtd_pass.generator = FrozenModel(FixedPredictions(predicted, len(tiny_encoder.tokenizer)))
    layer_input = []
    first_layer = rtd_pass.discriminator.encoder.layer[0]
    hook = first_layer.register_forward_pre_hook(lambda module, args, kwargs: layer_input.append(
        args[0] if args else kwargs["hidden_states"]), with_kwargs=True)
    h, inputs = sentence_vectors(2, TINY_BERT["hidden_size"])
    rtd_pass(tokens, tiny_encoder, inputs)
    hook.remove()
    (states,) = layer_input
    assert torch.equal(states[:, 0], h.detach())  # h enters layer 1 as it is: not normalised, not dropped out
    edited = predicted.clone()
    edited[:, 0], edited[:, -1] = tiny_encoder.tokenizer.cls_token_id, tiny_encoder.tokenizer.pad_token_id
    with torch.no_grad():
        own = rtd_pass.discriminator.embeddings(input_ids=edited, token_type_ids=tokens.features["token_type_ids"])
    assert torch.equal(states[:, 1:], own[:, 1:])
    # The hook is gone after the pass: the discriminator alone reads its own [CLS] embedding again.
    assert not rtd_pass.discriminator.embeddings._forward_hooks


def test_rtd_trains_the_encoder_side_and_the_discriminator_never_the_generator(rtd_pass, tiny_encoder):
    tokens = TwiceMasked(tiny_encoder.tokenizer, 0.3)(dict(tiny_encoder.tokenize(
        ["the cat sees a red ball", "a child follows the bird home slowly"])), seed=0)
    h, inputs = sentence_vectors(4, TINY_BERT["hidden_size"])
    term = LOSSES.build("rtd", generator="unused")
    loss, logs = term(inputs.with_tokens({"replaced": rtd_pass(tokens, tiny_encoder, inputs)}))
    loss.backward()
    assert h.grad is not None and h.grad.abs().sum() > 0  # not detached: RTD trains the encoder too
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in rtd_pass.classifier.parameters())
    assert rtd_pass.discriminator.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    generator = rtd_pass.generator.model
    assert all(p.grad is None and not p.requires_grad for p in generator.parameters())
    assert set(logs) == {"loss", "acc", "replaced", "replaced_acc"}


def test_the_generator_is_outside_the_module_tree_but_moves_with_the_pass(rtd_pass):
    generator = rtd_pass.generator.model
    own = {p.data_ptr() for p in rtd_pass.parameters()}
    assert own and not any(p.data_ptr() in own for p in generator.parameters())  # never in the optimizer
    assert not any("generator" in key for key in rtd_pass.state_dict())  # never in a checkpoint
    assert {name for name, _ in rtd_pass.named_children()} == {"discriminator", "classifier"}
    rtd_pass.eval()
    assert generator.training  # its mode is the pass's setting (dropout on), not the loop's
    rtd_pass.double()
    assert next(generator.parameters()).dtype == torch.float64  # .to() reaches it
    assert next(rtd_pass.discriminator.parameters()).dtype == torch.float64


def test_generator_dropout_off_makes_it_deterministic(tiny_encoder, generator_dir):
    token_pass = ReplacedTokensPass(generator=str(generator_dir), generator_dropout=False)
    token_pass.setup(tiny_encoder, None)
    assert not token_pass.generator.model.training


def test_the_discriminator_starts_as_a_copy_of_the_encoder(rtd_pass, tiny_encoder):
    mine, theirs = rtd_pass.discriminator.state_dict(), tiny_encoder.backbone.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) and mine[k].data_ptr() != theirs[k].data_ptr() for k in mine)


def hand_cross_entropy(logits: list[list[float]], labels: list[int]) -> list[float]:
    return [-(row[label] - math.log(math.exp(row[0]) + math.exp(row[1]))) for row, label in zip(logits, labels,
                                                                                                 strict=True)]


def test_the_loss_is_the_two_class_cross_entropy_over_real_tokens_or_every_position():
    logits = torch.tensor([[[2.0, -1.0], [0.5, 0.5], [-1.0, 3.0], [0.3, -0.2]],
                           [[1.0, 0.0], [0.0, 2.0], [4.0, -4.0], [-2.0, 1.0]]])
    labels = torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0]])
    attention = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    per_token = hand_cross_entropy(logits.reshape(-1, 2).tolist(), labels.reshape(-1).tolist())
    real = [per_token[i] for i, on in enumerate(attention.reshape(-1).tolist()) if on]
    inputs = LossInputs(tokens={"replaced": ReplacedTokens(logits, labels, attention)})
    loss, logs = LOSSES.build("rtd")(inputs)
    assert loss.item() == pytest.approx(sum(real) / len(real), rel=1e-6)
    assert logs["acc"].item() == pytest.approx(4 / 5)  # row 0: right, tie (argmax 0) vs 1, right; row 1: right x2
    assert logs["replaced"].item() == pytest.approx(3 / 5)
    assert logs["replaced_acc"].item() == pytest.approx(2 / 3)
    # pad_positions: the authors' CrossEntropyLoss over every padded position (models.py:272).
    padded, _ = LOSSES.build("rtd", pad_positions=True)(inputs)
    assert padded.item() == pytest.approx(sum(per_token) / len(per_token), rel=1e-6)
    assert padded.item() == pytest.approx(nn.CrossEntropyLoss()(logits.view(-1, 2), labels.view(-1)).item())


def test_the_objective_is_infonce_plus_lambda_rtd():
    objective = build_objective([{"name": "infonce", "temperature": 0.05},
                                 {"name": "rtd", "weight": 0.005, "generator": "unused"}])
    logits, labels = torch.randn(2, 4, 2), torch.tensor([[0, 1, 0, 0], [0, 0, 1, 0]])
    anchor, positive = torch.randn(2, 8), torch.randn(2, 8)
    inputs = LossInputs(anchor=anchor, positive=positive,
                        tokens={"replaced": ReplacedTokens(logits, labels, torch.ones(2, 4, dtype=torch.long))})
    total, logs = objective(inputs)
    assert total.item() == pytest.approx(logs["infonce.loss"].item() + 0.005 * logs["rtd.loss"].item(), rel=1e-6)
    assert set(objective.passes) == {"replaced"}


def test_a_generator_with_another_vocabulary_is_refused_naming_the_key(tiny_encoder, tmp_path):
    directory = save_tiny_generator(tmp_path / "generator")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.add_tokens(["[NEW]"])
    tokenizer.save_pretrained(directory)
    with pytest.raises(ConfigError, match=r"rtd generator .*: its vocabulary is not the encoder's \(30523 tokens, "
                                          r"the encoder's tokenizer 30522\).*set the rtd term's generator"):
        ReplacedTokensPass(generator=str(directory)).setup(tiny_encoder, None)


def test_a_model_without_mlm_head_weights_is_refused_as_a_generator(tiny_encoder, tmp_path):
    from transformers import AutoTokenizer

    directory = tmp_path / "encoder"
    tiny_encoder.backbone.save_pretrained(directory)
    AutoTokenizer.from_pretrained(tiny_encoder.tokenizer.name_or_path).save_pretrained(directory)
    with pytest.raises(ConfigError, match=r"has no weights for cls\.predictions.*must be a trained masked language"):
        load_generator(str(directory))


def test_a_cselab_pretrain_output_serves_as_generator_with_its_trained_head(tiny_encoder, tmp_path):
    """`cselab pretrain` saves the backbone and its MLM head beside it (mlm_head.safetensors); loaded as a
    generator, its head is that one, not a random one."""
    from cselab.model.mlm_head import MlmHead

    tiny_encoder.mlm_head = MlmHead(tiny_encoder.backbone)
    with torch.no_grad():
        tiny_encoder.mlm_head.head.predictions.transform.dense.weight.normal_()
    saved = tiny_encoder.save(tmp_path / "pretrained")
    generator, tokenizer = load_generator(str(saved))
    assert torch.equal(generator.cls.predictions.transform.dense.weight,
                       tiny_encoder.mlm_head.head.predictions.transform.dense.weight)
    assert torch.equal(generator.get_output_embeddings().weight, tiny_encoder.input_embeddings())
    assert tokenizer.get_vocab() == tiny_encoder.tokenizer.get_vocab()


def test_a_projection_of_another_width_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"model\.projection: rtd gives the discriminator .* \(16 wide\)"):
        LOSSES.build("rtd", embedding_size=16, hidden_size=32)
    with pytest.raises(ValueError, match="mask_ratio"):
        LOSSES.build("rtd", mask_ratio=1.5)


def test_the_recipe_is_the_authors_bert_base_sts_setting():
    """run_diffcse.sh: lr 7e-6 (l.3), mask 0.30 (l.4), lambda 0.005 (l.5), generator distilbert-base-uncased
    (l.9), 2 epochs (l.12), batch 64 (l.13), max_seq_len 32 (l.15), eval every 125 steps (l.19), temperature
    0.05 (l.25); [CLS] with the batch-norm projector in training only (l.20-21, 28)."""
    config = load_config("diffcse")
    assert (config.optim.lr, config.optim.batch_size, config.optim.epochs) == (7e-6, 64, 2)
    assert (config.model.max_seq_len, config.train.eval_steps) == (32, 125)
    assert (config.model.pooler, config.model.mlp, config.model.projection) == ("cls_before_pooler", "false",
                                                                                "diffcse_mlp")
    assert config.views.positive == "dropout"
    assert config.objective == [{"name": "infonce", "temperature": 0.05},
                                {"name": "rtd", "weight": 0.005, "mask_ratio": 0.3,
                                 "generator": "distilbert-base-uncased"}]
