"""A token-level objective from outside the package is one file (docs/architecture.md, "Where to add
things"): a module written to a temporary folder registers a token pass (what the collator makes, what
the step runs) and the term that reads it, with a head of its own; a recipe composes it with InfoNCE and
trains two steps."""
from __future__ import annotations

import importlib
import json
import math
import sys

import pytest
import torch

from cselab.config import load_config
from cselab.losses import LOSSES
from cselab.losses.base import TOKEN_PASSES
from tests.conftest import TINY_BERT

PLUGIN = '''
"""Replaced-token detection with random replacements (ELECTRA's task without a generator): one file."""
import torch
import torch.nn.functional as F

from cselab.losses.base import LOSSES, LossTerm, TokenBatch, TokenPass, register_token_pass

SEEN = {"prepared": [], "ran": [], "read": []}


class RandomReplacement:
    """The collator side (picklable): a share of the real tokens replaced by random ones."""

    def __init__(self, tokenizer, share):
        self.share, self.vocab = share, len(tokenizer)
        self.special = torch.tensor(sorted(set(tokenizer.all_special_ids)))

    def __call__(self, features, seed):
        ids = features["input_ids"]
        generator = torch.Generator().manual_seed(seed)
        real = (features["attention_mask"] == 1) & ~torch.isin(ids, self.special)
        chosen = real & (torch.rand(ids.shape, generator=generator) < self.share)
        replaced = torch.where(chosen, torch.randint(self.vocab, ids.shape, generator=generator), ids)
        positions = real.reshape(-1).nonzero().squeeze(1)
        labels = (replaced != ids).reshape(-1)[positions].float()
        SEEN["prepared"].append((seed, ids.clone(), replaced.clone(), positions, labels))
        return TokenBatch({**features, "input_ids": replaced}, positions, labels)


@register_token_pass("plugin_replaced", "the sentences with random tokens put in, through the backbone")
class ReplacedTokens(TokenPass):
    def __init__(self, share: float = 0.2):
        super().__init__()
        self.share = share

    def preparer(self, tokenizer):
        return RandomReplacement(tokenizer, self.share)

    def forward(self, tokens, encoder, inputs):
        states = encoder.token_states(tokens.features)
        SEEN["ran"].append(inputs.anchor is not None)
        return states.reshape(-1, states.shape[-1]).index_select(0, tokens.positions), tokens.labels


@LOSSES.register("plugin_detect", "which tokens were replaced, from the backbone's states")
class Detection(LossTerm):
    needs = frozenset({"plugin_replaced"})

    def __init__(self, share: float = 0.2, hidden_size: int | None = None):
        super().__init__()
        self.token_passes = {"plugin_replaced": {"share": share}}
        self.classify = None if hidden_size is None else torch.nn.Linear(hidden_size, 1)

    def forward(self, inputs):
        states, labels = inputs.plugin_replaced
        SEEN["read"].append(len(labels))
        loss = F.binary_cross_entropy_with_logits(self.classify(states).squeeze(-1).float(), labels)
        return loss, {"loss": loss.detach()}
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    saved = [registry.snapshot() for registry in (LOSSES, TOKEN_PASSES)]
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "cselab_token_plugin.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    yield importlib.import_module("cselab_token_plugin")
    sys.modules.pop("cselab_token_plugin", None)
    for registry, snapshot in zip((LOSSES, TOKEN_PASSES), saved, strict=True):
        registry.restore(snapshot)


def test_a_token_level_objective_in_one_file_trains_two_steps(plugin, tiny_corpus, tmp_path):
    from cselab.train import checkpoint as ckpt
    from cselab.train.loop import train

    out = tmp_path / "run"
    config = load_config("simcse", [
        f"model.from_config={json.dumps(TINY_BERT)}", "model.name_or_path=minilm", f"data.corpus={tiny_corpus}",
        "objective=[{name: infonce, temperature: 0.05}, {name: plugin_detect, weight: 0.5, share: 0.3}]",
        "optim.batch_size=8", "optim.max_steps=2", "train.log_steps=1", "train.eval_steps=0", "train.save_steps=2",
        "train.precision=fp32", f"train.output_dir={out}"])
    summary = train(config, progress=False)

    assert summary["finished"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    assert all(math.isfinite(r["plugin_detect.loss"]) and math.isfinite(r["infonce.loss"]) for r in records)
    # The collator made the pass's tokens at each step, with a seed of the step's own: about 30% of the
    # real tokens replaced, and the labels say which.
    assert len(plugin.SEEN["prepared"]) == 2 and plugin.SEEN["prepared"][0][0] != plugin.SEEN["prepared"][1][0]
    for _, before, after, positions, labels in plugin.SEEN["prepared"]:
        changed = (before != after).reshape(-1)[positions].float()
        assert torch.equal(changed, labels) and 0.1 < labels.mean() < 0.5
    # The step ran the pass with this process's sentence vectors at hand, and the term read its output.
    assert plugin.SEEN["ran"] == [True, True]
    assert plugin.SEEN["read"] == [len(p[3]) for p in plugin.SEEN["prepared"]]
    # The term's own head was trained and is the checkpoint's.
    saved = ckpt.read_checkpoint(ckpt.list_checkpoints(out / "checkpoints")[-1])
    heads = saved.states["heads"]["tensors"]
    weight = next(value for name, value in heads.items() if name.endswith("classify.weight"))
    assert weight.shape == (1, TINY_BERT["hidden_size"])


def test_two_terms_reading_one_pass_with_other_settings_are_refused(plugin):
    from cselab.config import ConfigError

    with pytest.raises(ConfigError, match=r"objective\[1\] \(plugin_detect\): reads the token pass plugin_replaced "
                                          r"with other settings than objective\[0\] \(share\)"):
        load_config("simcse", ["objective=[{name: plugin_detect, share: 0.3}, {name: plugin_detect, share: 0.1}]"])


def test_a_token_pass_named_like_an_input_field_or_a_view_role_is_refused(plugin):
    from cselab.losses.base import register_token_pass

    for name in ("anchor", "labels", "extra", "tokens", "views"):
        with pytest.raises(ValueError, match=f"token pass {name!r}: the name of a LossInputs attribute or a view role"):
            register_token_pass(name, "clashes")
