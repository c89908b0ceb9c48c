"""Each config key's facts live on its field (issue 40): its doc, its choices, the rule its value
follows, and whether it may change on resume; validation and the resume check are derived from them."""
from __future__ import annotations

import dataclasses

import pytest

from cselab.config import Config, ConfigError, load_config
from cselab.config.schema import key_facts, resume_safe_keys
from cselab.train.checkpoint import config_differences


def test_every_key_has_a_doc_and_each_section_field_is_listed_once():
    facts = key_facts()
    keys = [f.key for f in facts]
    assert len(keys) == len(set(keys))
    expected = {f"{top.name}.{item.name}" if dataclasses.is_dataclass(top.type) or top.name in
                ("model", "data", "views", "optim", "train") else top.name
                for top in dataclasses.fields(Config)
                for item in (dataclasses.fields(getattr(Config(), top.name))
                             if dataclasses.is_dataclass(getattr(Config(), top.name)) else [top])}
    assert set(keys) == expected
    assert [f.key for f in facts if len(f.doc) < 10] == []


def test_the_resume_check_ignores_exactly_the_keys_marked_resume_safe():
    saved = Config().to_dict()
    for facts in key_facts():
        section, _, name = facts.key.rpartition(".")
        current = Config().to_dict()
        place = current[section] if section else current
        value = place[name]
        place[name] = "changed" if not isinstance(value, (int, float)) or isinstance(value, bool) else value + 1
        assert config_differences(saved, current) == ([] if facts.resume_safe else [facts.key]), facts.key
    assert {"train.output_dir", "train.log_steps", "recipe"} <= resume_safe_keys()
    assert "optim.lr" not in resume_safe_keys()


@pytest.mark.parametrize(("override", "message"), [
    ("views.label_sampling=per_epoch", "views.label_sampling: 'per_epoch' is not one of per_sentence, per_step"),
    ("model.pooler=nope", "model.pooler: 'nope' is not one of auto, "),
    ("optim.lr=0", "optim.lr: must be > 0"),
    ("data.max_sentences=1", "data.max_sentences: must be >= 2, null (every sentence) or auto, got 1"),
    ("optim.max_steps=0", "optim.max_steps: must be >= 1 or null"),
])
def test_a_fields_own_rule_and_choices_refuse_a_bad_value_by_key(override, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        load_config("simcse", [override])


def test_a_term_gets_every_size_the_contract_promises(tiny_encoder):
    """losses/base.py's LossTerm docstring promises a term the model's sizes it leaves null."""
    import torch

    from cselab.config import ViewsConfig
    from cselab.train.setup import term_context

    context = term_context(tiny_encoder, torch.nn.Identity(), ViewsConfig(label=["eda_random_swap"]))
    promised = {"embedding_size", "hidden_size", "vocab_size", "model_type", "hidden_act", "layer_norm_eps",
                "num_labels", "projected"}
    assert promised == set(context)
    assert context["vocab_size"] == len(tiny_encoder.tokenizer) and context["hidden_act"] == "gelu"
    assert context["layer_norm_eps"] == tiny_encoder.backbone.config.layer_norm_eps and context["num_labels"] == 2
    assert context["projected"] is False
