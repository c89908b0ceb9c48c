"""On a CUDA GPU, with inductor's Triton kernels: the compiled unpadded layers compute the padded forward's
outputs and gradients in bf16, replay their dropout for GradCache, give the same results with CUDA
graphs (train.compile: reduce-overhead), and a compiled training step makes no host synchronisation.
Skipped (with the reason) where there is no GPU; the GPU suite's tests part runs them."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import TINY_BERT
from tests.speed.test_compiled_unpadded import NO_DROPOUT, gradient_errors, relative_error, sentences

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none visible to PyTorch)")]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def encoders(model_config: dict, setting: str = "true"):
    """The same weights on the GPU: padded and eager, and as train.compile=SETTING leaves them."""
    import copy

    from cselab.config import ModelConfig, TrainConfig
    from cselab.model.encoder import SentenceEncoder
    from cselab.speed import speed_up

    torch.manual_seed(0)
    reference = SentenceEncoder.from_config(model_config, "minilm", pooler="cls", max_seq_len=32).to("cuda")
    ours = copy.deepcopy(reference)
    speed_up(ours, TrainConfig(compile=setting), ModelConfig(unpad="auto"), torch.device("cuda"))
    assert ours.unpadded and ours.compiled_layers is not None
    return reference.train(), ours.train()


def step(encoder, texts, grad: bool = True) -> torch.Tensor:
    features = {k: v.cuda() for k, v in encoder.tokenize(texts).items()}
    tokens = int(features["attention_mask"].sum())
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
        vectors = encoder(features, real_tokens=tokens)
    if grad:
        (vectors.float().pow(2).sum() + vectors[:, :3].float().sum()).backward()
    return vectors.detach().float()


def test_compiled_layers_compute_the_padded_forward_in_bf16_and_replay_their_dropout():
    reference, ours = encoders(NO_DROPOUT)
    texts = sentences(8, 13, seed=1)
    assert relative_error(step(ours, texts), step(reference, texts)) < 3e-2
    errors = gradient_errors(ours, reference)
    assert max(errors.values()) < 3e-2, errors

    _, noisy = encoders(TINY_BERT)  # dropout 0.1: GradCache's replay needs the same masks twice
    state = torch.cuda.get_rng_state()
    cached = step(noisy, texts, grad=False)
    torch.cuda.set_rng_state(state)
    assert torch.equal(cached, step(noisy, texts))
    assert not torch.equal(cached, step(noisy, texts))


def test_cuda_graphs_give_the_compiled_results():
    """reduce-overhead: each step's layers replayed as a CUDA graph; outputs copied out of its pool."""
    _, compiled = encoders(NO_DROPOUT, "true")
    _, graphed = encoders(NO_DROPOUT, "reduce-overhead")
    assert graphed.compiled_layers.mode == "reduce-overhead"
    kept = []
    for seed, (count, longest) in enumerate([(8, 13), (8, 20), (6, 13), (8, 13)]):
        texts = sentences(count, longest, seed=seed)
        for encoder in (compiled, graphed):
            encoder.zero_grad(set_to_none=True)
        theirs, ours = step(compiled, texts), step(graphed, texts)
        kept.append((ours, ours.clone()))
        assert relative_error(ours, theirs) < 1e-3
        errors = gradient_errors(graphed, compiled)
        assert max(errors.values()) < 1e-3, errors
    assert all(torch.equal(a, b) for a, b in kept)  # earlier steps' vectors were not overwritten


def test_a_compiled_training_run_steps_without_a_host_synchronisation(tiny_corpus, tmp_path):
    """A first run compiles (inductor may time its kernels, synchronising: a one-off); a second run of the
    same shapes reuses the graphs, and its steps are watched by CUDA's sync-debug mode and the counter."""
    from cselab.config import load_config
    from cselab.train.loop import train
    from tests.gpu.test_cuda import overrides
    from tests.train.sync_steps import counting_steps, describe

    for extra in ([], ["optim.grad_cache_chunk=4"]):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        for run, counted in (("warm", False), ("counted", True)):
            settings = [*overrides(tiny_corpus, tmp_path / f"{run}{len(extra)}", steps=6), "train.compile=true",
                        *extra]
            if not counted:
                train(load_config("simcse", settings), progress=False)
                continue
            with counting_steps(cuda_sync_debug=True) as counter:
                summary = train(load_config("simcse", settings), progress=False)
        assert summary["finished"] and torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
        assert counter.total == 0, describe(counter)
