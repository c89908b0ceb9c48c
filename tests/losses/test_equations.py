"""Every loss term against an independent numpy transcription of its paper's equation.

Each ``*_equation`` function below is written from the paper (cited in its docstring), in float64
with explicit loops over the sums of the equation, without looking at the module: the module, on
random inputs, must give the same number to 1e-5 (relative). Where the module deviates from the
printed equation on purpose (a mean instead of a sum), the transcription says so and the test
compares with the equation divided by that count.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cselab.losses import LOSSES
from cselab.losses.base import LossInputs, MaskedTokens

SEEDS = [0, 1, 2]
REL = 1e-5


def cos(u: np.ndarray, v: np.ndarray) -> float:
    """sim(u, v) = u^T v / (||u|| ||v||) (CLEAR Sec. 3.1, SimCSE Eq. 1)."""
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def as_torch(*arrays: np.ndarray) -> list[torch.Tensor]:
    return [torch.tensor(a, dtype=torch.float32) for a in arrays]


def random_batch(seed: int, n: int = 6, d: int = 8, m: int | None = None) -> dict[str, np.ndarray]:
    """Anchors, correlated positives (as dropout views are), and hard negatives near the anchors."""
    rng = np.random.default_rng(seed)
    m = n if m is None else m
    anchor = rng.normal(size=(n, d))
    negative = anchor[:m] + 0.8 * rng.normal(size=(m, d))
    return {"anchor": anchor, "positive": anchor + 0.5 * rng.normal(size=(n, d)), "negative": negative,
            "negative_positive": negative + 0.5 * rng.normal(size=(m, d))}


# --- InfoNCE: SimCSE (Gao et al. 2021) ---------------------------------------------------------------

def infonce_equation(h: np.ndarray, h_pos: np.ndarray, tau: float, h_neg: np.ndarray | None = None,
                     hard_weight: float = 0.0) -> float:
    """SimCSE Eq. (1), and Eq. (5) with hard negatives h_j^-, averaged over the N anchors:

        l_i = -log e^{sim(h_i, h_i^+)/tau} / sum_j (e^{sim(h_i, h_j^+)/tau} + e^{sim(h_i, h_j^-)/tau})

    The hard negative of anchor i itself gets SimCSE's weight w added to its scaled logit
    (e^{sim/tau + w}; w = 0 leaves it an ordinary negative). h^- may cover the first M anchors only.
    """
    n = len(h)
    total = 0.0
    for i in range(n):
        denominator = sum(math.exp(cos(h[i], h_pos[j]) / tau) for j in range(n))
        if h_neg is not None:
            denominator += sum(math.exp(cos(h[i], h_neg[j]) / tau + (hard_weight if i == j else 0.0))
                               for j in range(len(h_neg)))
        total += -math.log(math.exp(cos(h[i], h_pos[i]) / tau) / denominator)
    return total / n


@pytest.mark.parametrize("seed", SEEDS)
def test_infonce_is_simcse_eq_1(seed):
    x = random_batch(seed)
    anchor, positive = as_torch(x["anchor"], x["positive"])
    loss, _ = LOSSES.build("infonce", temperature=0.05)(LossInputs(anchor, positive))
    assert loss.item() == pytest.approx(infonce_equation(x["anchor"], x["positive"], 0.05), rel=REL)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weight", [0.0, 0.7])
def test_infonce_with_hard_negatives_is_simcse_eq_5(seed, weight):
    x = random_batch(seed, n=6, m=4)  # hard negatives for the first 4 anchors only
    anchor, positive, negative = as_torch(x["anchor"], x["positive"], x["negative"])
    term = LOSSES.build("infonce", temperature=0.05, hard_negative_weight=weight)
    loss, _ = term(LossInputs(anchor, positive, negative))
    expected = infonce_equation(x["anchor"], x["positive"], 0.05, x["negative"], weight)
    assert loss.item() == pytest.approx(expected, rel=REL)


# --- NT-Xent: CLEAR (Wu et al. 2020) and UNA's 4N form (Shu et al. 2023) ----------------------------

def ntxent_pair_loss(z: list[np.ndarray], i: int, j: int, tau: float, extra: list[np.ndarray] = ()) -> float:
    """CLEAR Eq. (1): l(i, j) = -log e^{sim(z_i, z_j)/tau} / sum_{k=1}^{2N} 1[k != i] e^{sim(z_i, z_k)/tau}
    (``extra``: vectors that only add to the denominator, the hard-negative columns)."""
    denominator = sum(math.exp(cos(z[i], z[k]) / tau) for k in range(len(z)) if k != i)
    denominator += sum(math.exp(cos(z[i], e) / tau) for e in extra)
    return -math.log(math.exp(cos(z[i], z[j]) / tau) / denominator)


def clear_cl_equation(views_1: np.ndarray, views_2: np.ndarray, tau: float, extra: np.ndarray | None = None) -> float:
    """CLEAR Eq. (2): L_CL = sum_{i=1}^{2N} sum_{j=1}^{2N} m(i, j) l(i, j), m(i, j) = 1 for the two
    augmentations of one sentence. The set {s~} is laid out as sentence k's two views side by side
    (2k, 2k + 1), another order than the module's, which must not matter."""
    z = [v for pair in zip(views_1, views_2, strict=True) for v in pair]
    extra_list = [] if extra is None else list(extra)
    total = 0.0
    for i in range(len(z)):
        for j in range(len(z)):
            positive_pair = i != j and i // 2 == j // 2
            if positive_pair:
                total += ntxent_pair_loss(z, i, j, tau, extra_list)
    return total


def una_ntxent_equation(s: np.ndarray, s_view: np.ndarray, neg: np.ndarray, neg_view: np.ndarray, tau: float) -> float:
    """UNA's symmetric NT-Xent over 4N views (authors' code, NOTES.md), mean over the views: the set
    is {sentence, its dropout view, its UNA negative, the negative's dropout view} for every sentence;
    each view's positive is its partner (s <-> s', n <-> n'), every other view of the 4N is a negative,
    self excluded (CLEAR Eq. 1 over 4N views)."""
    z, partner = [], {}
    for k in range(len(s)):
        base = len(z)
        z.extend([s[k], s_view[k], neg[k], neg_view[k]])
        partner.update({base: base + 1, base + 1: base, base + 2: base + 3, base + 3: base + 2})
    return sum(ntxent_pair_loss(z, i, partner[i], tau) for i in range(len(z))) / len(z)


def symmetric_infonce_equation(h: np.ndarray, h_pos: np.ndarray, tau: float) -> float:
    """AugCSE's symmetric contrastive loss: (InfoNCE(h -> h^+) + InfoNCE(h^+ -> h)) / 2, each SimCSE Eq. (1)."""
    return (infonce_equation(h, h_pos, tau) + infonce_equation(h_pos, h, tau)) / 2


@pytest.mark.parametrize("seed", SEEDS)
def test_ntxent_sum_is_clear_eq_2(seed):
    x = random_batch(seed)
    anchor, positive = as_torch(x["anchor"], x["positive"])
    loss, _ = LOSSES.build("ntxent", temperature=0.05, reduction="sum")(LossInputs(anchor, positive))
    assert loss.item() == pytest.approx(clear_cl_equation(x["anchor"], x["positive"], 0.05), rel=REL)


@pytest.mark.parametrize("seed", SEEDS)
def test_ntxent_mean_is_clear_eq_2_over_the_2n_views(seed):
    x = random_batch(seed)
    anchor, positive = as_torch(x["anchor"], x["positive"])
    loss, _ = LOSSES.build("ntxent", temperature=0.05)(LossInputs(anchor, positive))
    expected = clear_cl_equation(x["anchor"], x["positive"], 0.05) / (2 * len(anchor))
    assert loss.item() == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("seed", SEEDS)
def test_ntxent_with_negatives_as_instances_is_unas_4n_ntxent(seed):
    x = random_batch(seed)
    anchor, positive, negative, twin = as_torch(x["anchor"], x["positive"], x["negative"], x["negative_positive"])
    term = LOSSES.build("ntxent", temperature=0.05, hard_negatives="instances")
    loss, _ = term(LossInputs(anchor, positive, negative, negative_positive=twin))
    expected = una_ntxent_equation(x["anchor"], x["positive"], x["negative"], x["negative_positive"], 0.05)
    assert loss.item() == pytest.approx(expected, rel=REL)
    # On steps without UNA negatives the same term is NT-Xent over the 2N views.
    plain, _ = term(LossInputs(anchor, positive))
    assert plain.item() == pytest.approx(clear_cl_equation(x["anchor"], x["positive"], 0.05) / 12, rel=REL)


@pytest.mark.parametrize("seed", SEEDS)
def test_ntxent_with_negatives_as_columns(seed):
    x = random_batch(seed)
    anchor, positive, negative = as_torch(x["anchor"], x["positive"], x["negative"])
    loss, _ = LOSSES.build("ntxent", temperature=0.05, hard_negatives="columns")(LossInputs(anchor, positive, negative))
    expected = clear_cl_equation(x["anchor"], x["positive"], 0.05, x["negative"]) / (2 * len(anchor))
    assert loss.item() == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("seed", SEEDS)
def test_ntxent_without_intra_view_negatives_is_augcse_symmetric_loss(seed):
    x = random_batch(seed)
    anchor, positive = as_torch(x["anchor"], x["positive"])
    loss, _ = LOSSES.build("ntxent", temperature=0.05, intra_view_negatives=False)(LossInputs(anchor, positive))
    assert loss.item() == pytest.approx(symmetric_infonce_equation(x["anchor"], x["positive"], 0.05), rel=REL)


# --- Focal-InfoNCE (Hou & Li 2023) --------------------------------------------------------------------

def focal_equation(h: np.ndarray, h_pos: np.ndarray, tau: float, m: float, h_neg: np.ndarray | None = None) -> float:
    """Focal-InfoNCE Eq. (2): l_i = -log e^{(s_p^i)^2/tau} / (sum_{j != i} e^{s_n^{i,j}(s_n^{i,j} + m)/tau}
    + e^{(s_p^i)^2/tau}), s_p^i = sim(h_i, h_i^+), s_n^{i,j} = sim(h_i, h_j^+). The paper writes
    L = sum_i l_i; the module averages over the N anchors (as SimCSE's loss does), so this returns
    the mean. Hard negatives (cselab's extension) add terms of the negative form to the sum."""
    n = len(h)
    total = 0.0
    for i in range(n):
        s_p = cos(h[i], h_pos[i])
        negatives = [cos(h[i], h_pos[j]) for j in range(n) if j != i]
        negatives += [] if h_neg is None else [cos(h[i], e) for e in h_neg]
        positive_term = math.exp(s_p ** 2 / tau)
        total += -math.log(positive_term / (sum(math.exp(s * (s + m) / tau) for s in negatives) + positive_term))
    return total / n


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("with_negatives", [False, True])
def test_focal_is_eq_2(seed, with_negatives):
    x = random_batch(seed)
    anchor, positive, negative = as_torch(x["anchor"], x["positive"], x["negative"])
    inputs = LossInputs(anchor, positive, negative if with_negatives else None)
    loss, _ = LOSSES.build("focal", temperature=0.07, margin=0.3)(inputs)
    expected = focal_equation(x["anchor"], x["positive"], 0.07, 0.3, x["negative"] if with_negatives else None)
    assert loss.item() == pytest.approx(expected, rel=REL)


# --- MLM: BERT's masked-LM loss with its prediction head (CLEAR Eq. 3's L_MLM) ------------------------

def gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x), Phi the standard normal CDF (Hendrycks & Gimpel; BERT's activation)."""
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def mlm_equation(hidden: np.ndarray, labels: np.ndarray, dense_w: np.ndarray, dense_b: np.ndarray,
                 ln_gamma: np.ndarray, ln_beta: np.ndarray, eps: float, embeddings: np.ndarray,
                 bias: np.ndarray) -> float:
    """L_MLM = -(1/K) sum_k log p(x_k | masked context), over the K masked positions (BERT, Devlin et
    al. 2019), with BERT's prediction head: t = LayerNorm(gelu(W h + b)), p = softmax(E t + c), E
    the input embedding matrix (tied decoder)."""
    total = 0.0
    for h, label in zip(hidden, labels, strict=True):
        t = gelu(dense_w @ h + dense_b)
        t = (t - t.mean()) / math.sqrt(t.var() + eps) * ln_gamma + ln_beta
        scores = embeddings @ t + bias
        log_normaliser = math.log(sum(math.exp(s - scores.max()) for s in scores)) + scores.max()
        total += -(scores[label] - log_normaliser)
    return total / len(labels)


def bert_mlm_head(hidden_size: int, vocab: int, rng):
    """The backbone's own MLM head (model/mlm_head.py) of a small BERT, with non-trivial LayerNorm and
    biases so that every part of the head counts, and its parameters as float64 arrays."""
    from transformers import BertConfig, BertModel

    from cselab.model.mlm_head import MlmHead

    config = BertConfig(hidden_size=hidden_size, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                        vocab_size=vocab, layer_norm_eps=1e-12)
    backbone = BertModel(config, add_pooling_layer=False).double()
    head = MlmHead(backbone).double()
    transform = head.head.predictions.transform
    with torch.no_grad():
        transform.LayerNorm.weight.copy_(torch.tensor(rng.normal(1.0, 0.2, hidden_size)))
        transform.LayerNorm.bias.copy_(torch.tensor(rng.normal(0.0, 0.2, hidden_size)))
        head.head.predictions.bias.copy_(torch.tensor(rng.normal(0.0, 0.5, vocab)))
    numpy = {"dense_w": transform.dense.weight, "dense_b": transform.dense.bias, "ln_gamma": transform.LayerNorm.weight,
             "ln_beta": transform.LayerNorm.bias, "embeddings": backbone.get_input_embeddings().weight,
             "bias": head.head.predictions.bias}
    return head, {name: value.detach().numpy() for name, value in numpy.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_mlm_is_the_masked_token_cross_entropy_of_berts_head(seed):
    rng = np.random.default_rng(seed)
    hidden_size, vocab, k = 8, 23, 7
    torch.manual_seed(seed)
    head, weights = bert_mlm_head(hidden_size, vocab, rng)
    hidden, labels = rng.normal(size=(k, hidden_size)), rng.integers(0, vocab, size=k)
    term = LOSSES.build("mlm")
    loss, _ = term(LossInputs(masked=MaskedTokens(head(torch.tensor(hidden)), torch.tensor(labels))))
    expected = mlm_equation(hidden, labels, eps=1e-12, **weights)
    assert loss.item() == pytest.approx(expected, rel=REL)


# --- AugCSE's discriminator (Tang et al. 2022) --------------------------------------------------------

def discriminator_equation(original: np.ndarray, augmented: np.ndarray, labels: np.ndarray, w1: np.ndarray,
                           b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, num_labels: int) -> float:
    """AugCSE Eq. (2), averaged over the batch: L = -(1/K) sum_{i=1}^{K} y_i log p(y_i) + (1 - y_i)
    log(1 - p(y_i)), y the one-hot augmentation type, p(y_i) = sigmoid(tanh(W2 tanh(W1 [u; v] + b1)
    + b2))_i (the discriminator of the authors' code, NOTES.md; dropout off)."""
    total = 0.0
    for u, v, label in zip(original, augmented, labels, strict=True):
        output = np.tanh(w2 @ np.tanh(w1 @ np.concatenate([u, v]) + b1) + b2)
        for i in range(num_labels):
            y = 1.0 if i == label else 0.0
            p = 1.0 / (1.0 + math.exp(-output[i]))
            total += -(y * math.log(p) + (1 - y) * math.log(1 - p)) / num_labels
    return total / len(labels)


@pytest.mark.parametrize("seed", SEEDS)
def test_discriminator_is_augcse_eq_2(seed):
    rng = np.random.default_rng(seed)
    n, d, k = 6, 8, 5
    torch.manual_seed(seed)
    term = LOSSES.build("discriminator", num_labels=k, embedding_size=d).eval()  # eval: no dropout
    original, augmented = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    labels = rng.integers(0, k, size=n)
    u, v = as_torch(original, augmented)
    loss, _ = term(LossInputs(anchor=u, positive=u, label_view=v, labels=torch.tensor(labels)))
    numpy = {name: p.detach().double().numpy() for name, p in term.named_parameters()}
    expected = discriminator_equation(original, augmented, labels, numpy["hidden.weight"], numpy["hidden.bias"],
                                      numpy["output.weight"], numpy["output.bias"], k)
    assert loss.item() == pytest.approx(expected, rel=REL)


# --- Whole objectives from the shipped recipes: CLEAR Eq. 3, AugCSE's adversarial total ---------------

def recipe_objective(recipe: str, **context):
    """The recipe's own terms and weights, built as training builds them (sizes from ``context``)."""
    from cselab.config import load_config
    from cselab.losses import build_objective

    return build_objective(load_config(recipe).objective, context)


def numeric_gradient(f, x: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar f at x, entry by entry, in float64."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += step
        down[index] -= step
        grad[index] = (f(up) - f(down)) / (2 * step)
    return grad


@pytest.mark.parametrize("seed", SEEDS)
def test_clear_recipe_objective_is_eq_3(seed):
    """CLEAR Eq. (3): L = L_MLM + L_CL, with L_CL the sum of Eq. (2); the recipe's weights, not only the terms."""
    x, rng = random_batch(seed), np.random.default_rng(seed + 100)
    hidden_size, vocab, k = 8, 23, 7
    torch.manual_seed(seed)
    objective = recipe_objective("clear-del-word")
    head, weights = bert_mlm_head(hidden_size, vocab, rng)
    hidden, labels = rng.normal(size=(k, hidden_size)), rng.integers(0, vocab, size=k)
    anchor, positive = as_torch(x["anchor"], x["positive"])
    logits = head(torch.tensor(hidden))
    total, _ = objective(LossInputs(anchor, positive, masked=MaskedTokens(logits, torch.tensor(labels))))
    expected = clear_cl_equation(x["anchor"], x["positive"], 0.05) + mlm_equation(hidden, labels, eps=1e-12,
                                                                                    **weights)
    assert total.item() == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("seed", SEEDS)
def test_augcse_recipe_objective_and_its_gradient_reversal(seed):
    """AugCSE: L = L_contrastive + lambda L_disc (Eq. 2, lambda = the recipe's 0.005) for the value and the
    discriminator's own gradient; the encoder's embeddings get the contrastive gradient MINUS alpha * lambda
    times L_disc's (the gradient-reversal layer, alpha 1), checked against numpy's finite differences."""
    x, rng = random_batch(seed, n=4, d=6), np.random.default_rng(seed + 100)
    d, k = 6, 13
    torch.manual_seed(seed)
    objective = recipe_objective("augcse", embedding_size=d).eval()  # eval: the discriminator's dropout off
    (weight, disc) = objective.weights[1], objective.terms[1]
    assert (objective.names, weight, disc.alpha) == (["ntxent", "discriminator"], 0.005, 1.0)
    augmented, labels = rng.normal(size=(4, d)), rng.integers(0, k, size=4)
    anchor, positive, view = (torch.tensor(a, dtype=torch.float64, requires_grad=True)
                              for a in (x["anchor"], x["positive"], augmented))
    total, _ = objective(LossInputs(anchor=anchor, positive=positive, label_view=view, labels=torch.tensor(labels)))
    total.backward()
    p = {name: q.detach().double().numpy() for name, q in disc.named_parameters()}

    def disc_loss(original, aug):
        return discriminator_equation(original, aug, labels, p["hidden.weight"], p["hidden.bias"],
                                      p["output.weight"], p["output.bias"], k)

    def contrastive(a):
        return symmetric_infonce_equation(a, x["positive"], 0.05)

    assert total.item() == pytest.approx(contrastive(x["anchor"]) + weight * disc_loss(x["anchor"], augmented), rel=REL)
    # The augmented view feeds the discriminator alone: its gradient is L_disc's, reversed and scaled.
    expected_view = -disc.alpha * weight * numeric_gradient(lambda v: disc_loss(x["anchor"], v), augmented)
    assert np.abs(expected_view).max() > 1e-5
    # The discriminator computes in float32: tolerances are a small share of the largest entry.
    close(view.grad.numpy(), expected_view)
    # The anchor feeds both terms: what is left after the contrastive gradient is the reversed L_disc one
    # (to a few percent: the contrastive gradient, ~1e4 times larger, carries float32 rounding; the
    # unreversed sign would be off by 200%).
    reversed_part = -disc.alpha * weight * numeric_gradient(lambda a: disc_loss(a, augmented), x["anchor"])
    left = anchor.grad.numpy() - numeric_gradient(contrastive, x["anchor"])
    np.testing.assert_allclose(left, reversed_part, rtol=0, atol=0.05 * np.abs(reversed_part).max())
    # The discriminator's parameters descend L_disc: their gradient is lambda * dL_disc/dW, not reversed.
    expected_w2 = weight * numeric_gradient(
        lambda w: discriminator_equation(x["anchor"], augmented, labels, p["hidden.weight"], p["hidden.bias"], w,
                                         p["output.bias"], k), p["output.weight"])
    close(disc.output.weight.grad.double().numpy(), expected_w2)


def close(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-4 * np.abs(expected).max())
