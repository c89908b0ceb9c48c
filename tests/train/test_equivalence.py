"""The restructured loop trains exactly as the loop before it: same losses, same final weights.

``loop_baseline.json`` holds the per-step losses and the sum of |weights| of the saved model, recorded
with the training loop as it was before its restructuring (fp32, CPU, one thread). Recipes whose
steps draw no extra randomness are compared; the MLM recipes are not, because their masks now come
from a per-step seeded generator in the data collator instead of the global RNG (by design).
The tolerance allows only for floating-point differences between CPUs' kernels.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cselab.config import load_config
from cselab.train.loop import train
from tests.conftest import TINY_BERT

BASELINE = json.loads((Path(__file__).parent / "loop_baseline.json").read_text())["runs"]
RECIPES = {"simcse": ("simcse", []), "simcse-gradcache": ("simcse", ["optim.grad_cache_chunk=12"]),
           "simcse-padded": ("simcse", ["model.unpad=false"]), "focal": ("focal", []),
           "una": ("una", ["views.negative_every=2"]), "una-ntxent": ("una-ntxent", ["views.negative_every=2"]),
           "augcse-4": ("augcse-4", [])}


@pytest.mark.parametrize("case", sorted(RECIPES))
def test_losses_and_weights_match_the_loop_before_the_restructuring(case, tmp_path, tiny_corpus):
    from safetensors.torch import load_file

    recipe, extra = RECIPES[case]
    run = tmp_path / case
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}", "optim.batch_size=16",
                 "optim.lr=5e-4", "train.eval_steps=0", "train.save_steps=0", "train.log_steps=1",
                 "train.precision=fp32", f"train.output_dir={run}", "optim.max_steps=6", *extra]
    train(load_config(recipe, overrides), resume=False, progress=False)
    losses = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    weights = load_file(str(run / "model.safetensors"))
    assert losses == pytest.approx(BASELINE[case]["losses"], rel=1e-4)
    assert sum(float(w.double().abs().sum()) for w in weights.values()) == pytest.approx(
        BASELINE[case]["weights_abs_sum"], rel=1e-6)
