"""train.compile compiles the unpadded layers (speed/compiled.py): the same outputs and gradients as the
eager padded forward, few recompilations over batches of any length, no host sync inside the steps.

Dynamo and AOT autograd trace the same graphs (forward, and the backward of the joint graph) whatever
backend runs them; these tests run them with ``aot_eager`` (inductor's C++ build of every kernel
takes a minute here), or, where only dynamo's graphs and guards matter, with ``eager``.
``test_inductor_*`` runs inductor itself once (slow)."""
from __future__ import annotations

import copy
import json

import pytest
import torch
import torch._dynamo

from cselab.config import ModelConfig, TrainConfig
from cselab.model.encoder import SentenceEncoder
from cselab.speed import compiled, speed_up
from cselab.speed.compiled import graph_bound, length_bucket, length_buckets
from tests.conftest import TINY_BERT

NO_DROPOUT = {**TINY_BERT, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
WORDS = ("the cat sat on a mat while an old dog slept near the warm fire and two birds sang in the tall "
         "green tree by the quiet river").split()


@pytest.fixture(autouse=True)
def fresh_dynamo(monkeypatch):
    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


def sentences(count: int, longest: int, seed: int) -> list[str]:
    """``count`` sentences of 1 to ``longest`` words, the first one ``longest`` words long."""
    generator = torch.Generator().manual_seed(seed)
    lengths = [longest] + torch.randint(1, longest + 1, (count - 1,), generator=generator).tolist()
    return [" ".join(WORDS[(seed + i + j) % len(WORDS)] for j in range(n)) for i, n in enumerate(lengths)]


def padded_and_compiled(model_config: dict, pooler: str = "cls") -> tuple[SentenceEncoder, SentenceEncoder]:
    """The same weights twice: as transformers runs them (padded, eager) and with train.compile."""
    torch.manual_seed(0)
    reference = SentenceEncoder.from_config(model_config, "minilm", pooler=pooler, max_seq_len=32)
    ours = copy.deepcopy(reference)
    speed_up(ours, TrainConfig(compile="true", fast_cpu=False), ModelConfig(unpad="auto"), torch.device("cpu"))
    assert ours.unpadded and ours.compiled_layers is not None
    return reference.train(), ours.train()


def step(encoder: SentenceEncoder, texts: list[str], precision: torch.dtype | None = None) -> torch.Tensor:
    """A training step's forward (as train/steps.py calls it: with the host's token count) and backward."""
    features = encoder.tokenize(texts)
    with torch.autocast("cpu", dtype=precision or torch.float32, enabled=precision is not None):
        vectors = encoder(features, real_tokens=int(features["attention_mask"].sum()))
    (vectors.float().pow(2).sum() + vectors[:, :3].float().sum()).backward()
    return vectors.detach().float()


def relative_error(ours: torch.Tensor, theirs: torch.Tensor, floor: float = 1e-12) -> float:
    """|ours - theirs| / |theirs|, the norm at least ``floor`` (a gradient that is zero but for rounding,
    as the key bias's: softmax ignores a constant added to every score)."""
    return float((ours.float() - theirs.float()).norm() / theirs.float().norm().clamp(min=floor))


def gradient_errors(ours: SentenceEncoder, reference: SentenceEncoder) -> dict[str, float]:
    """Each parameter's gradient error, against a floor of 1e-3 of the largest gradient's norm."""
    pairs = list(zip(ours.named_parameters(), reference.parameters(), strict=True))
    assert all(mine.grad is not None and theirs.grad is not None for (_, mine), theirs in pairs)
    floor = 1e-3 * max(float(theirs.grad.norm()) for _, theirs in pairs)
    return {name: relative_error(mine.grad, theirs.grad, floor) for (name, mine), theirs in pairs}


@pytest.mark.parametrize("pooler", ["cls", "avg_first_last"])  # the last layer; every layer's states
@pytest.mark.parametrize("precision, tolerance", [(None, 1e-5), (torch.bfloat16, 3e-2)], ids=["fp32", "bf16"])
def test_the_compiled_unpadded_layers_compute_the_padded_forwards_outputs_and_gradients(pooler, precision, tolerance):
    reference, ours = padded_and_compiled(NO_DROPOUT, pooler)
    texts = sentences(6, 13, seed=1)  # 13 words: a length bucket of 16, pads at the end of every row
    theirs_vectors = step(reference, texts, precision)
    our_vectors = step(ours, texts, precision)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the compiled layers ran
    assert not torch._dynamo.utils.counters["graph_break"]  # one graph: nothing falls back to Python
    assert relative_error(our_vectors, theirs_vectors) < tolerance
    errors = gradient_errors(ours, reference)
    assert max(errors.values()) < tolerance, errors


def test_attention_probability_dropout_stays_on_in_the_compiled_path(monkeypatch):
    """SimCSE's noise: with only the attention's dropout on, two training forwards differ (with none,
    the compiled path is deterministic: the test above)."""
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    _, ours = padded_and_compiled({**NO_DROPOUT, "attention_probs_dropout_prob": 0.3})
    features = ours.tokenize(sentences(4, 9, seed=2))
    tokens = int(features["attention_mask"].sum())
    with torch.no_grad():
        first, second = ours(features, real_tokens=tokens), ours(features, real_tokens=tokens)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    assert not torch.allclose(first, second)


def test_recompilations_stay_bounded_over_batches_of_every_length(monkeypatch):
    monkeypatch.setattr(compiled, "BACKEND", "eager")  # recompilations are dynamo's (its guards)
    _, ours = padded_and_compiled(TINY_BERT)
    counters = torch._dynamo.utils.counters
    seen = set()
    for batch, longest in enumerate([3, 30, 7, 12, 31, 2, 17, 9, 25, 5, 14, 28, 1, 20, 11]):
        texts = sentences(2 + batch % 7, longest, seed=batch)  # 2 to 8 sentences
        length = ours.tokenize(texts)["input_ids"].shape[1]
        seen.add(length_bucket(length, ours.max_seq_len))
        step(ours, texts)
        if batch % 4 == 0:  # GradCache's first pass: the same rows without gradient
            with torch.no_grad():
                features = ours.tokenize(texts)
                ours(features, real_tokens=int(features["attention_mask"].sum()))
    # 15 batches of 15 distinct lengths and 7 batch sizes: one graph per length bucket (x2 without gradient)
    assert len(seen) >= 3 and seen <= set(length_buckets(32))
    assert counters["stats"]["unique_graphs"] <= 2 * len(seen) <= graph_bound(32)
    # the buckets and the gradient modes alone: sentences and rows never recompile
    assert counters["stats"]["unique_graphs"] >= len(seen)
    assert not counters["graph_break"]


def test_evaluation_and_probes_run_eager(tiny_encoder):
    """Only a training step's forward (training mode, the host's token count) is compiled: encoding
    for evaluation and the geometry probe's dropout views would only add compilations."""
    speed_up(tiny_encoder, TrainConfig(compile="true"), ModelConfig(), torch.device("cpu"))
    tiny_encoder.encode(sentences(5, 20, seed=3))
    tiny_encoder.train()
    with torch.no_grad():
        tiny_encoder(tiny_encoder.tokenize(sentences(5, 20, seed=4)))  # no token count: a probe
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 0


def test_length_buckets():
    assert [length_bucket(n, 32) for n in (1, 8, 9, 16, 17, 31, 32, 40)] == [8, 8, 16, 16, 32, 32, 32, 40]
    assert length_buckets(32) == [8, 16, 32] and length_buckets(48) == [8, 16, 32, 48]
    assert length_bucket(5, 6) == 6  # never past the training length (the position embeddings' limit)


def test_a_training_run_under_compile_makes_no_host_sync_inside_its_steps(tiny_corpus, tmp_path):
    """The steps' forward and backward through the compiled layers, counted by HostSyncCounter (which
    lets dynamo compile, then counts every op the aot_eager graphs dispatch), GradCache's chunks too."""
    from cselab.config import load_config
    from cselab.train.loop import train
    from tests.recipes.test_recipes import tiny_overrides
    from tests.train.sync_steps import counting_steps, describe

    for extra in ([], ["optim.grad_cache_chunk=4"]):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        overrides = [*tiny_overrides(tiny_corpus, tmp_path / f"run{len(extra)}"), "optim.max_steps=4",
                     "train.compile=true", *extra]
        with counting_steps() as counter:
            summary = train(load_config("simcse", overrides), progress=False)
        assert summary["steps"] == 4
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the steps ran compiled
        assert not torch._dynamo.utils.counters["graph_break"]
        assert counter.total == 0, describe(counter)


def test_the_counter_counts_what_compiled_code_reads_back():
    """A compiled function that reads a value back is counted: the counter does not make it eager."""
    from cselab.train.host_syncs import HostSyncCounter

    reads = torch.compile(lambda x: x.sin().sum().item() + 1, backend="aot_eager")
    quiet = torch.compile(lambda x: x.sin().sum() + 1, backend="aot_eager", fullgraph=True)
    x = torch.randn(5)
    with HostSyncCounter() as counter:
        reads(x)
        quiet(x)
    assert counter.counts["_local_scalar_dense"] == 1 and counter.total == 1
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 2


@pytest.mark.slow
def test_inductor_computes_the_padded_forward_and_replays_its_dropout(monkeypatch):
    """Inductor itself (its generated kernels, its own random numbers): the padded forward's outputs
    and gradients; and GradCache's replay: a chunk encoded without gradient and again with it from the
    same RNG state gets the same dropout masks (the two are different graphs)."""
    monkeypatch.setattr(compiled, "BACKEND", "inductor")
    reference, ours = padded_and_compiled(NO_DROPOUT)
    texts = sentences(6, 13, seed=5)
    assert relative_error(step(ours, texts), step(reference, texts)) < 1e-5
    errors = gradient_errors(ours, reference)
    assert max(errors.values()) < 1e-5, errors

    _, noisy = padded_and_compiled(TINY_BERT)  # dropout 0.1
    features = noisy.tokenize(texts)
    tokens = int(features["attention_mask"].sum())
    state = torch.get_rng_state()
    with torch.no_grad():
        cached = noisy(features, real_tokens=tokens)
    torch.set_rng_state(state)
    replayed = noisy(features, real_tokens=tokens)
    assert torch.equal(cached, replayed.detach())
    assert not torch.equal(replayed.detach(), noisy(features, real_tokens=tokens).detach())  # dropout is on


def test_old_boolean_settings_still_load(tmp_path):
    from cselab.config import load_config
    from cselab.errors import ConfigError

    recipe = tmp_path / "old.yaml"
    for written, read in (("true", "true"), ("false", "false"), ("auto", "auto")):
        recipe.write_text(f"inherit: simcse\ntrain:\n  compile: {written}\n  device: cpu\n"
                          f"model:\n  from_config: {json.dumps(TINY_BERT)}\n")
        assert load_config(str(recipe)).train.compile == read
    assert load_config("simcse").train.compile == "auto"
    with pytest.raises(ConfigError, match=r"^train.compile: 'sometimes' is not one of auto, true, false"):
        load_config("simcse", ["train.compile=sometimes"])
