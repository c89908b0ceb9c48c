"""The restructured loop trains exactly as the loop before it: same losses, same final weights.

``loop_baseline.json`` holds the per-step losses and the sum of |weights| of the saved model, recorded
with the training loop as it was before its restructuring (fp32, CPU, one thread). Recipes whose
steps draw no extra randomness are compared. The MLM recipes changed by design (their masks now
come from a per-step seeded generator in the data collator instead of the global RNG): for them
``mlm_baseline`` was recorded after the restructuring, to catch any later drift. The tolerance
allows only for floating-point differences between CPUs' kernels. Recipes whose defaults later moved
to their papers' (UNA's 4N NT-Xent and no gradient clipping, CLEAR's summed loss, AugCSE's DiffCSE
projector, nlpaug's own ``random_swap``) are run with the settings the baseline was recorded with:
``una-infonce`` is the former ``una``. AugCSE's views changed by design when ``tense_transformation``
gained the future tense: ``augcse-4`` was recorded again then (``views_changed_baseline``), to catch
any later drift.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cselab.config import load_config
from cselab.train.loop import train
from tests.conftest import TINY_BERT

RECORDED = json.loads((Path(__file__).parent / "loop_baseline.json").read_text())
BASELINE = {**RECORDED["runs"], **RECORDED["mlm_baseline"]}
RECIPES = {"simcse": ("simcse", []), "simcse-gradcache": ("simcse", ["optim.grad_cache_chunk=12"]),
           "simcse-padded": ("simcse", ["model.unpad=false"]), "focal": ("focal", []),
           # UNA's recipes later dropped gradient clipping (the authors' loop); the baseline clipped at 1.0.
           "una": ("una-infonce", ["views.negative_every=2", "optim.max_grad_norm=1.0"]),
           "una-ntxent": ("una-ntxent", ["views.negative_every=2", "optim.max_grad_norm=1.0"]),
           "augcse-4": ("augcse-4", ["model.projection=bn_mlp", "views.label_sampling=per_step",
                                     "views.label_params={random_swap: {rule: cselab}}"]),  # the head before
           # DiffCSE's diffcse_mlp, label views drawn at every step as when recorded (now: once per sentence),
           # and random_swap's own rule of then (now: nlpaug's RandomWordAug, the authors')
           # The baseline predates CLEAR's summed L_CL (Eq. 2); the mean form it was recorded with is pinned here.
           "clear-del-word": ("clear-del-word", ["objective=[{name: ntxent, temperature: 0.05}, "
                                                 "{name: mlm, weight: 1.0, probability: 0.15}]"])}


def run(recipe: str, out: Path, corpus: Path, *extra: str) -> tuple[list[dict], float]:
    from safetensors.torch import load_file

    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={corpus}", "optim.batch_size=16",
                 "optim.lr=5e-4", "train.eval_steps=0", "train.save_steps=0", "train.log_steps=1",
                 "train.precision=fp32", f"train.output_dir={out}", "optim.max_steps=6",
                 "model.head_init=pytorch",  # the heads' initialisation when the baseline was recorded
                 *extra]
    train(load_config(recipe, overrides), progress=False)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    weights = load_file(str(out / "model.safetensors"))
    # The BERT pooler (unused by cselab) is saved since the baseline was recorded, so that loaders
    # find every weight they expect; it is not trained and is left out of the comparison.
    return records, sum(float(w.double().abs().sum()) for k, w in weights.items() if not k.startswith("pooler."))


@pytest.mark.parametrize("case", sorted(RECIPES))
def test_losses_and_weights_match_the_loop_before_the_restructuring(case, tmp_path, tiny_corpus):
    recipe, extra = RECIPES[case]
    records, weights = run(recipe, tmp_path / case, tiny_corpus, *extra)
    assert [r["loss"] for r in records] == pytest.approx(BASELINE[case]["losses"], rel=1e-4)
    assert weights == pytest.approx(BASELINE[case]["weights_abs_sum"], rel=1e-6)


def test_log_windows_checkpoints_and_a_resume_change_nothing_but_the_records(tmp_path, tiny_corpus):
    """Windows close every 3 steps and at every checkpoint (every 2): each record is the mean of its
    window's losses; a run resumed from step 4 ends with the same weights."""
    import shutil

    out = tmp_path / "run"
    settings = ("train.log_steps=3", "train.save_steps=2", "train.keep_checkpoints=2")
    records, weights = run("simcse", out, tiny_corpus, *settings)
    losses = BASELINE["simcse"]["losses"]
    windows = [(1, 2), (3, 3), (4, 4), (5, 6)]  # closed at 2 (save), 3 (log), 4 (save), 6 (both)
    assert [r["step"] for r in records] == [end for _, end in windows]
    for record, (start, end) in zip(records, windows, strict=True):
        assert record["loss"] == pytest.approx(sum(losses[start - 1:end]) / (end - start + 1), rel=1e-4)
        assert record["window_steps"] == end - start + 1
    assert weights == pytest.approx(BASELINE["simcse"]["weights_abs_sum"], rel=1e-6)
    shutil.rmtree(out / "checkpoints" / "step-00000006")  # as if killed after step 5
    resumed, again = run("simcse", out, tiny_corpus, *settings)
    assert again == weights and [r["loss"] for r in resumed] == [r["loss"] for r in records]
