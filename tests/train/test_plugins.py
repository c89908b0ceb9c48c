"""Extension points from outside the package (docs/architecture.md, "Where to add things"): one module,
written to a temporary folder and imported, adds an augmenter, a loss term, a view role, a pooler, a
projection head, a selection metric and an evaluation task; a recipe file of the user's own composes
them, trains two steps, and the trained model is evaluated on the task."""
from __future__ import annotations

import importlib
import json
import math
import sys

import pytest
import torch

from cselab.augment import AUGMENTERS, load_all
from cselab.config import load_config
from cselab.evaluate import tasks as task_registry
from cselab.evaluate.dev import DEV_METRICS
from cselab.losses import LOSSES
from cselab.losses.base import ON_DEMAND, VIEW_ROLES
from cselab.model.heads import HEADS
from cselab.model.poolers import POOLERS
from tests.conftest import TINY_BERT

PLUGIN = '''
"""A user's own module: each extension point is a class and its registry decorator, nothing else."""
import numpy as np
import torch
import torch.nn.functional as F

from cselab.augment.base import Augmenter, register_augmenter
from cselab.evaluate.dev import DEV_METRICS, DevMetric
from cselab.evaluate.sts import spearman100
from cselab.evaluate.tasks import TaskBase, task
from cselab.losses.base import LOSSES, LossTerm, register_view_role
from cselab.model.heads import HEADS
from cselab.model.poolers import POOLERS

SEEN = {"augmented": [], "loss_rows": [], "metric_calls": 0, "pooled": 0, "heads": [], "sorted": [], "sorted_rows": []}
PROBE = ["a cat sits on the mat", "a dog runs in the park", "the sun is bright today", "rain falls at night"]


@register_augmenter
class ReverseWords(Augmenter):
    name, tag, description = "plugin_reverse", "altering", "the words in reverse order"

    def augment(self, sentences, seed):
        out = [" ".join(reversed(s.split())) for s in sentences]
        SEEN["augmented"].append(list(zip(sentences, out)))
        return out


@POOLERS.register("plugin_max", "the largest value of each dimension over the real tokens")
def max_pool(hidden_states, mask):
    SEEN["pooled"] += 1
    return hidden_states[-1].masked_fill(~mask.bool()[..., None], float("-inf")).amax(dim=1)


@HEADS.register("plugin_tanh", "a linear map squashed by tanh")
def tanh_head(hidden_size, output_size=None):
    head = torch.nn.Sequential(torch.nn.Linear(hidden_size, output_size or hidden_size), torch.nn.Tanh())
    SEEN["heads"].append(head)
    return head


@register_view_role("plugin_sorted", "each anchor with its words in alphabetical order, when a term reads it")
def sorted_words(views):
    texts = [" ".join(sorted(anchor.split())) for anchor in views.anchors]
    SEEN["sorted"].append(list(zip(views.anchors, texts)))
    return texts


@LOSSES.register("plugin_order", "word order should not matter: each anchor close to its sorted words")
class OrderInvariance(LossTerm):
    needs = frozenset({"anchor", "plugin_sorted"})

    def forward(self, inputs):
        SEEN["sorted_rows"].append(len(inputs.plugin_sorted))
        loss = (1 - F.cosine_similarity(inputs.anchor.float(), inputs.plugin_sorted.float())).mean()
        return loss, {"loss": loss.detach()}


@LOSSES.register("plugin_align", "alignment: distance of each anchor to its positive, to a power")
class Alignment(LossTerm):
    needs = frozenset({"anchor", "positive"})

    def __init__(self, power: float = 2.0):
        super().__init__()
        if power <= 0:
            raise ValueError("power must be > 0")
        self.power = power

    def forward(self, inputs):
        distance = (F.normalize(inputs.anchor.float(), dim=-1) - F.normalize(inputs.positive.float(), dim=-1))
        loss = distance.norm(dim=-1).pow(self.power).mean()
        SEEN["loss_rows"].append(len(inputs.anchor))
        return loss, {"loss": loss.detach(), "power": loss.new_full((), self.power)}


@DEV_METRICS.register("plugin_spread", "how far apart a few probe sentences are (needs no SentEval data)")
class Spread(DevMetric):
    name, label, needs_senteval = "plugin_spread", "probe spread", False

    def scores(self, encode):
        SEEN["metric_calls"] += 1
        vectors = np.asarray(encode(PROBE), dtype=np.float64)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return {self.key: float(1 - (vectors @ vectors.T).mean())}


@task("plugin_pairs", "scored pairs from pairs.tsv in the data folder: Spearman x100")
class Pairs(TaskBase):
    group, display = "own", "Plugin pairs"

    def relative_files(self):
        return ["pairs.tsv"]

    def load(self):
        rows = [line.split("\\t") for line in self.files()[0].read_text().splitlines()]
        return [(a, b, float(score)) for a, b, score in rows]

    def sentences(self):
        return sorted({s for a, b, _ in self.data() for s in (a, b)})

    def score(self, lookup):
        left, right = lookup([a for a, _, _ in self.data()]), lookup([b for _, b, _ in self.data()])
        cosine = (left * right).sum(1) / np.linalg.norm(left, axis=1) / np.linalg.norm(right, axis=1)
        return {"score": spearman100([g for _, _, g in self.data()], cosine), "n": len(self.data())}
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The module above, imported from tmp_path; every registry it writes to is restored afterwards."""
    load_all()  # the shipped augmenters first: the restored registry must still hold them
    registries = (AUGMENTERS, LOSSES, DEV_METRICS, task_registry.TASKS, POOLERS, HEADS, VIEW_ROLES)
    saved = [registry.snapshot() for registry in registries]
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "cselab_test_plugin.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    on_demand = set(ON_DEMAND)
    module = importlib.import_module("cselab_test_plugin")
    yield module
    sys.modules.pop("cselab_test_plugin", None)
    ON_DEMAND.intersection_update(on_demand)  # the set the collator reads: restored in place
    for registry, snapshot in zip(registries, saved, strict=True):
        registry.restore(snapshot)


def test_a_plugin_module_and_a_recipe_add_an_augmenter_a_loss_a_view_role_a_pooler_a_head_a_metric_and_a_task(
        plugin, tiny_corpus, tmp_path):
    from cselab import load
    from cselab.evaluate.runner import evaluate
    from cselab.train.loop import train

    out = tmp_path / "run"
    # The user's own recipe composes the plugin's parts (a recipe file of their own, inheriting SimCSE's).
    recipe = tmp_path / "my-method.yaml"
    recipe.write_text("inherit: simcse\n"
                      "model: {pooler: plugin_max, projection: plugin_tanh}\n"
                      "views: {positive: plugin_reverse}\n"
                      "objective:\n"
                      "  - {name: infonce, temperature: 0.05}\n"
                      "  - {name: plugin_align, weight: 0.5, power: 3}\n"
                      "  - {name: plugin_order, weight: 0.1}\n"
                      "train: {select_on: [plugin_spread]}\n", encoding="utf-8")
    config = load_config(str(recipe), [
        f"model.from_config={json.dumps(TINY_BERT)}", "model.name_or_path=minilm", f"data.corpus={tiny_corpus}",
        "optim.batch_size=8", "optim.max_steps=2", "train.log_steps=1", "train.eval_steps=1", "train.save_steps=2",
        "train.precision=fp32", f"train.output_dir={out}"])
    assert config.model.pooler == "plugin_max" and config.objective[2]["name"] == "plugin_order"
    summary = train(config, progress=False)

    assert summary["finished"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "loss" in r]
    assert [r["step"] for r in trained] == [1, 2]
    for record in trained:  # both terms logged under their own names
        assert math.isfinite(record["infonce.loss"]) and math.isfinite(record["plugin_align.loss"])
        assert record["plugin_align.power"] == 3.0
    # The positives were the plugin's reversed sentences, and its loss read them.
    assert plugin.SEEN["augmented"] and all(after == " ".join(reversed(before.split()))
                                            for batch in plugin.SEEN["augmented"] for before, after in batch)
    assert plugin.SEEN["loss_rows"] == [8, 8]
    # The plugin view role: its texts made by the collator from each step's anchors, encoded as rows of the
    # step and read by the plugin term as inputs.plugin_sorted.
    assert len(plugin.SEEN["sorted"]) == 2 and all(after == " ".join(sorted(before.split()))
                                                   for batch in plugin.SEEN["sorted"] for before, after in batch)
    assert plugin.SEEN["sorted_rows"] == [8, 8]
    assert all(math.isfinite(record["plugin_order.loss"]) for record in trained)
    # The plugin pooler pooled every encoding; the plugin head was built once, and its weights are the
    # checkpoint's (the heads component holds every trainable weight outside the backbone).
    assert plugin.SEEN["pooled"] >= 4 and len(plugin.SEEN["heads"]) == 1
    head_weight = plugin.SEEN["heads"][0][0].weight
    from cselab.train import checkpoint as ckpt
    saved = ckpt.read_checkpoint(ckpt.list_checkpoints(out / "checkpoints")[-1])
    assert torch.equal(saved.states["heads"]["tensors"]["1.0.weight"], head_weight.detach())
    # The plugin metric selected the model: evaluated at each step, its best kept in the summary.
    assert plugin.SEEN["metric_calls"] >= 2
    assert summary["best_plugin_spread"] == max(r["plugin_spread"] for r in records if "plugin_spread" in r)

    data = tmp_path / "data"
    data.mkdir()
    (data / "pairs.tsv").write_text("a cat sits\ta cat is sitting\t5\nthe sun is hot\tit rains a lot\t1\n"
                                    "a dog barks\ta dog is barking\t4.5\nthe sea is calm\ta man reads\t0.5\n")
    result = evaluate(load(str(out)), data, tasks="plugin_pairs", progress=False)
    assert result["tasks"]["plugin_pairs"]["n"] == 4
    assert -100 <= result["tasks"]["plugin_pairs"]["score"] <= 100


def test_a_plugin_view_role_is_made_only_where_a_term_reads_it_and_travels_with_the_collator(plugin, tiny_encoder):
    import pickle

    from cselab.data.collate import Collator
    from cselab.data.views import ViewBuilder

    sentences = ["a cat sits on the mat", "the dog runs", "birds fly south", "rain falls"]
    views = ViewBuilder(load_config("simcse").views, sentences, seed=0)
    assert "plugin_sorted" not in Collator(tiny_encoder.tokenize, views)((0, sentences)).roles
    reading = Collator(tiny_encoder.tokenize, views, reads=frozenset({"plugin_sorted"}))
    roles = reading((0, sentences)).roles
    assert list(roles) == ["anchor", "positive", "plugin_sorted"] and roles["plugin_sorted"] == slice(8, 12)
    # A data-loader worker started by spawn gets the role's function with the collator (by reference).
    assert [name for name, _ in pickle.loads(pickle.dumps(reading)).roles] == ["anchor", "positive", "negative",
                                                                             "label_view", "plugin_sorted"]


def test_a_view_role_named_like_an_input_field_is_refused(plugin):
    from cselab.losses.base import register_view_role

    for name in ("labels", "masked", "extra", "views"):
        with pytest.raises(ValueError, match=f"view role {name!r}: the name of a LossInputs attribute"):
            register_view_role(name, "clashes")


def test_a_plugin_loss_with_a_bad_parameter_fails_before_training(plugin):
    from cselab.config import ConfigError

    with pytest.raises(ConfigError, match=r"objective\[1\].power: expected a finite number"):
        load_config("simcse", ["objective=[{name: infonce}, {name: plugin_align, power: fast}]"])
    with pytest.raises(ConfigError, match=r"objective\[0\] \(plugin_align\): power must be > 0"):
        load_config("simcse", ["objective=[{name: plugin_align, power: 0}]"])


def test_an_augmenter_that_is_no_augmenter_class_is_refused_as_it_registers():
    with pytest.raises(TypeError, match=r"augmenter 'a_function': make must subclass cselab.augment.base.Augmenter"):
        @AUGMENTERS.register("a_function", "a function, not an Augmenter")
        def make():
            return None
    assert "a_function" not in AUGMENTERS
