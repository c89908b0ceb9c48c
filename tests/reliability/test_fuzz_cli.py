"""The command line under fuzzed input (Hypothesis): recipe files, ``--set`` values, corpus bytes,
model directories, ``cselab encode`` inputs, and paths that are not what an option wants (folders
named like recipes, binaries, folders of stray files, directories that are no model).

Whatever the input, ``cselab`` exits 0 or 2 and never prints a traceback; an error (exit 2) is one
line on stderr; a command that fails leaves nothing behind (no output directory or file); no input
file is modified. Commands run in this process (``cselab.cli.main``) on a 2-layer, 32-wide BERT and
stop after one step, so each example takes a fraction of a second. The examples are derandomised:
CI runs the same ones every time.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cselab.cli import main
from tests.conftest import TINY_BERT

# CI: 60 fixed examples per test. A deeper, random search: CSELAB_FUZZ_EXAMPLES=2000 python -m pytest THIS_FILE
DEEP = int(os.environ.get("CSELAB_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=DEEP or 60, deadline=None, derandomize=not DEEP, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Keys that only cost time or machines (torch.compile, worker processes, a GPU, a downloaded model)
# are pinned after the fuzzed input; everything else is the fuzzer's.
PINNED = {"model.from_config": json.dumps(TINY_BERT), "model.name_or_path": "minilm", "train.compile": "false",
          "train.num_workers": "0", "train.device": "cpu", "train.eval_steps": "0", "train.save_steps": "0"}


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module", autouse=True)
def private_cache_and_no_peak_probe(tmp_path_factory):
    """Corpus indexes go to a cache of this module's own; the matmul peak behind the MFU figure is
    not probed (the probe takes 30 s for fp16 on a CPU, and the fuzzer may well ask for fp16)."""
    import cselab.train.throughput as throughput

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CSELAB_CACHE", str(tmp_path_factory.mktemp("cselab-cache")))
        patch.setattr(throughput, "matmul_peak_flops", lambda *args, **kwargs: 1e12)
        yield


def run_cli(argv: list[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code
    return Outcome(code, out.getvalue(), err.getvalue())


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (a folder or a file) by relative path, with its bytes."""
    if root.is_file():
        return {".": root.read_bytes()}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def check_contract(outcome: Outcome, command: str, inputs: dict[Path, dict[str, bytes]], outputs: list[Path]) -> None:
    """Exit 0 or 2, no traceback; exit 2 is one line and leaves no output; inputs are unchanged."""
    assert "Traceback" not in outcome.err and "internal error" not in outcome.err, outcome.err[-3000:]
    assert outcome.code in (0, 2), (outcome.code, outcome.err[-3000:])
    event(f"exit {outcome.code}")  # --hypothesis-show-statistics: how many examples got how far
    if outcome.code == 2:
        lines = outcome.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"cselab {command}: error: "), outcome.err[-3000:]
        assert not [p for p in outputs if p.exists()], f"written although the command failed: {outcome.err}"
    for path, before in inputs.items():
        assert snapshot(path) == before, f"{path} was modified"


def train(workdir: Path, corpus: Path, extra: list[str]) -> tuple[Outcome, Path]:
    out_dir = workdir / "run"
    argv = ["train", "--corpus", str(corpus), "--output-dir", str(out_dir), "--max-steps", "1", *extra]
    for key, value in PINNED.items():
        argv += ["--set", f"{key}={value}"]
    return run_cli(argv), out_dir


def write_corpus(folder: Path, lines: int = 24, name: str = "corpus.txt") -> Path:
    rng = random.Random(lines)
    words = "the cat dog bird river garden house letter song map apple ball sees likes reads red old".split()
    path = folder / name
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(6)) for _ in range(lines)) + "\n")
    return path


# --- values and keys ------------------------------------------------------------------------------

HUGE = ["9" * 30, "1" * 5000, "1e400", "-1e400", "1e-400", str(2**64), str(-(2**63)), "0x7fffffffffffffff"]
YAML_ODDITIES = ["2001-13-01", "2001-02-30", "!!int x", "!!float x", "!!timestamp x", "!!binary aGVsbG8=", "!!set {a}",
                 "!!python/name:os.system", "&a [*a]", "{a: &x 1, b: *x}", "[[[[[[[[[[1]]]]]]]]]]", "? [a]\n: 1",
                 "~", "null", ".nan", "-.inf", "[1, 2", "{a: 1", "'", "\"\\x00\"", "!!str", "|\n  text", "0o17",
                 "2020-01-01 10:00:00", "yes", "off"]
CHEAP_AUGMENTERS = ["dropout", "none", "identity", "eda_random_swap", "eda_random_deletion", "clear_word_deletion",
                    "random_crop", "word_repetition", "contraction", "telepathy", ""]
SCALARS = st.one_of(st.integers(-3, 300), st.sampled_from([0, 1, 2, -1, 2**31, 2**53, 2**64, 10**400]),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                    st.text(max_size=12), st.sampled_from(CHEAP_AUGMENTERS + ["fp32", "bf16", "fp8", "cls", "avg",
                                                                              "linear", "auto", "true", "false"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8) | st.sampled_from(["name", "weight", "temperature"]),
                                        inner, max_size=3), max_leaves=6)
SUBKEYS = ["pooler", "mlp", "max_seq_len", "from_config", "projection", "projection_params", "unpad", "column",
           "max_sentences", "dev_dir", "length_grouping", "packing", "validation_fraction", "anchor", "positive",
           "positive_params", "positive_prob", "negative", "negative_params", "negative_every", "label",
           "label_params", "lr", "weight_decay", "schedule", "warmup_ratio", "max_grad_norm", "batch_size", "epochs",
           "max_steps", "grad_cache_chunk", "seed", "precision", "log_steps", "keep_checkpoints", "fast_cpu", "nope"]
SECTIONS = ["model", "data", "views", "optim", "train", "objective", "recipe", "inherit", "extras"]
KNOWN_KEYS = [f"{section}.{key}" for section in SECTIONS[:5] for key in SUBKEYS] + ["objective", "recipe"]
RAW_VALUES = st.one_of(st.text(max_size=20), st.sampled_from(HUGE + YAML_ODDITIES + CHEAP_AUGMENTERS),
                       st.integers(-2, 70).map(str), st.floats(0, 1).map(str), st.sampled_from(["true", "false"]),
                       VALUES.map(lambda v: json.dumps(v, allow_nan=True)),
                       st.sampled_from(["[{name: infonce}]", "[{name: infonce, temperature: 1e-300}]",
                                        "[{name: discriminator, num_labels: 3}]", "[{name: mlm}]",
                                        "[eda_random_swap, eda_random_deletion]", "{ratio: 5}", "{p: x}"]))


# Settings that may well train: the fuzzer mixes them with the random ones above, so that runs get
# past validation and the training path meets odd but valid values too.
PLAUSIBLE = {
    "optim.lr": ["1e-3", "3e-5", "1", "1e-30", "1e30"], "optim.batch_size": ["2", "3", "8", "1000", "1e3"],
    "optim.warmup_ratio": ["0", "0.5", "0.99"], "optim.schedule": ["linear", "constant"],
    "optim.max_grad_norm": ["0", "1e30"], "optim.weight_decay": ["0", "100"],
    "optim.grad_cache_chunk": ["null", "1", "2", "1000"], "optim.epochs": ["1", "3", "1000000"],
    "model.pooler": ["auto", "cls", "cls_before_pooler", "avg", "avg_first_last", "avg_top2"],
    "model.mlp": ["auto", "true", "false"], "model.mlp_only_train": ["true", "false"],
    "model.max_seq_len": ["4", "5", "64", "100000"], "model.projection": ["none", "bn_mlp", "mlp"],
    "model.unpad": ["auto", "true", "false"], "data.max_sentences": ["null", "auto", "2", "3", "1000"],
    "data.length_grouping": ["0", "1", "2", "50"], "views.positive_prob": ["0", "0.5", "1"],
    "views.positive": ["dropout", "eda_random_swap", "eda_random_deletion", "random_crop", "word_repetition"],
    "views.negative": ["none", "eda_random_swap", "clear_word_deletion"], "views.negative_every": ["1", "2", "1000"],
    "views.anchor": ["identity", "eda_random_deletion", "random_crop"],
    "views.label": ["[]", "[eda_random_swap]", "[eda_random_swap, eda_random_deletion]"],
    "objective": ["[{name: infonce}]", "[{name: infonce, temperature: 1e-6}]", "[{name: ntxent}]", "[{name: focal}]",
                  "[{name: infonce}, {name: mlm, weight: 0.1}]", "[{name: infonce}, {name: discriminator}]"],
    "train.precision": ["fp32", "bf16", "fp16", "auto"], "train.log_steps": ["1", "1000"],
    "train.seed": ["0", "4294967295"], "train.fast_cpu": ["true", "false"], "data.column": ["text", "null"],
}
PLAUSIBLE_OVERRIDE = st.sampled_from(sorted(PLAUSIBLE)).flatmap(
    lambda key: st.tuples(st.just(key), st.sampled_from(PLAUSIBLE[key])))
OVERRIDES = st.lists(st.one_of(PLAUSIBLE_OVERRIDE, PLAUSIBLE_OVERRIDE,
                               st.tuples(st.sampled_from(KNOWN_KEYS) | st.text(max_size=12), RAW_VALUES)), max_size=4)


def render_recipe(mapping: dict, inherit: bool, mutation: tuple[str, int, bytes]) -> bytes:
    """A recipe file from a mapping, then one of: nothing, bytes inserted, a nasty line appended."""
    text = ("inherit: simcse\n" if inherit else "") + yaml.safe_dump(mapping, allow_unicode=True, sort_keys=False)
    data = text.encode("utf-8")
    kind, position, payload = mutation
    if kind == "insert":
        cut = position % (len(data) + 1)
        data = data[:cut] + payload + data[cut:]
    elif kind == "append":
        data += payload
    elif kind == "bom":
        data = b"\xef\xbb\xbf" + data
    return data


def nest(overrides: list[tuple[str, str]]) -> dict:
    """``[("optim.lr", "1e-3")]`` -> ``{"optim": {"lr": 0.001}}``: --set items as a recipe mapping."""
    mapping: dict = {}
    for key, raw in overrides:
        *sections, name = key.split(".")
        node = mapping
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = yaml.safe_load(raw)
    return mapping


RANDOM_MAPPINGS = st.dictionaries(st.sampled_from(SECTIONS) | st.text(max_size=6),
                                  st.dictionaries(st.sampled_from(SUBKEYS) | st.text(max_size=6), VALUES, max_size=4)
                                  | VALUES, max_size=4)
RECIPE_MAPPINGS = RANDOM_MAPPINGS | st.lists(PLAUSIBLE_OVERRIDE, max_size=6).map(nest)
MUTATIONS = st.one_of(st.just(("none", 0, b"")), st.just(("bom", 0, b"")),
                      st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=8)),
                      st.tuples(st.just("append"), st.just(0),
                                st.sampled_from(YAML_ODDITIES).map(lambda s: f"\noptim:\n  lr: {s}\n".encode())
                                | st.sampled_from([b"\nmodel: &m {pooler: cls}\nviews: *m\n", b"\n\t- bad: indent\n",
                                                   b"\noptim: {lr: " + b"9" * 5000 + b"}\n", b"\xff\xfe\x00",
                                                   b"\nrecipe: \xe9t\xe9\n", b"\ninherit: recipe.yaml\n"])))


@FUZZ
@given(mapping=RECIPE_MAPPINGS, inherit=st.booleans(), mutation=MUTATIONS)
def test_fuzzed_recipe_files(mapping, inherit, mutation):
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        corpus = write_corpus(workdir)
        recipe = workdir / "recipe.yaml"
        recipe.write_bytes(render_recipe(mapping, inherit, mutation))
        inputs = {workdir / "recipe.yaml": snapshot(recipe), corpus: snapshot(corpus)}
        outcome, out_dir = train(workdir, corpus, ["--recipe", str(recipe)])
        check_contract(outcome, "train", inputs, [out_dir])


@FUZZ
@given(overrides=OVERRIDES, seed=st.none() | st.integers(-5, 2**40))
def test_fuzzed_set_values(overrides, seed):
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        corpus = write_corpus(workdir)
        extra = [f"--seed={seed}"] if seed is not None else []
        for key, value in overrides:
            extra += ["--set", f"{key}={value}"]
        inputs = {corpus: snapshot(corpus)}
        outcome, out_dir = train(workdir, corpus, extra)
        check_contract(outcome, "train", inputs, [out_dir])


# --- corpus bytes -----------------------------------------------------------------------------------

SENTENCE = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)
ENCODINGS = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"])


def encode_text(lines: list[str], encoding: str, ending: str) -> bytes:
    text = ending.join(lines) + ending
    return text.encode(encoding, errors="replace")


CORPUS_BYTES = st.one_of(
    st.binary(max_size=3000),
    st.builds(encode_text, st.lists(SENTENCE, max_size=30), ENCODINGS, st.sampled_from(["\n", "\r\n", "\r"])),
    st.lists(SENTENCE | st.binary(max_size=40) | st.sampled_from(["\x00" * 5, "\ufeff", "x" * 20_000, ""]),
             max_size=20).map(lambda parts: b"\n".join(p.encode("utf-8") if isinstance(p, str) else p for p in parts)),
    st.sampled_from([b"", b"\n\n\n", b"\xef\xbb\xbf", b"\xff\xfe", b"\x00" * 100, b"a\nb\n", b"\xef\xbb\xbfa\nb\n"]),
)


def as_format(data: bytes, suffix: str) -> bytes:
    """The same bytes as a corpus of another kind: a text column, JSON records, or gzipped."""
    if suffix in (".csv", ".tsv"):
        return b"text\n" + data
    if suffix == ".jsonl":
        return b"\n".join(json.dumps({"text": line.decode("utf-8", errors="replace")}).encode()
                          if i % 3 else line for i, line in enumerate(data.split(b"\n")))
    return gzip.compress(data) if suffix.endswith(".gz") else data


@FUZZ
@given(data=CORPUS_BYTES, suffix=st.sampled_from([".txt", ".txt", ".txt.gz", ".csv", ".tsv", ".jsonl"]),
       batch=st.sampled_from(["2", "4", "64"]))
def test_fuzzed_corpus_bytes(data, suffix, batch):
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        corpus = workdir / f"corpus{suffix}"
        corpus.write_bytes(as_format(data, suffix))
        inputs = {corpus: snapshot(corpus)}
        outcome, out_dir = train(workdir, corpus, ["--set", f"optim.batch_size={batch}"])
        check_contract(outcome, "train", inputs, [out_dir])


# --- model directories ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A saved 2-layer model (cls pooler with SimCSE's MLP): what `cselab train` writes."""
    import torch

    from cselab.model.encoder import SentenceEncoder

    torch.manual_seed(0)
    encoder = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="cls", max_seq_len=32)
    return encoder.save(tmp_path_factory.mktemp("model") / "tiny")


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 70) | st.floats() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                   max_size=3), max_leaves=6)
CONFIG_KEYS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
               "max_position_embeddings", "model_type", "hidden_act", "type_vocab_size", "pad_token_id",
               "architectures", "pooler", "max_seq_len", "mlp", "pooling_mode", "max_seq_length", "layer_start"]


@st.composite
def model_damage(draw, files: list[str]):
    """One change to a model directory: (kind, file, argument)."""
    kind = draw(st.sampled_from(["delete", "truncate", "random_bytes", "flip_byte", "json_value", "json_junk",
                                 "bin_only", "extra_bin"]))
    target = draw(st.sampled_from(files))
    argument = draw(st.one_of(st.integers(0, 10**6), st.binary(max_size=64),
                              st.tuples(st.sampled_from(CONFIG_KEYS), JSONISH)))
    return kind, target, argument


def damage(model: Path, kind: str, target: str, argument) -> None:
    path = model / target
    if not path.exists():
        return
    data = path.read_bytes()
    number = argument if isinstance(argument, int) else len(data) // 2
    if kind == "delete":
        path.unlink()
    elif kind == "truncate":
        path.write_bytes(data[: number % (len(data) + 1)])
    elif kind == "random_bytes":
        path.write_bytes(argument if isinstance(argument, bytes) else random.Random(number).randbytes(64))
    elif kind == "flip_byte" and data:
        i = number % len(data)
        path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
    elif kind == "json_value" and isinstance(argument, tuple) and target.endswith(".json"):
        try:
            content = json.loads(data)
        except ValueError:
            return
        if isinstance(content, dict):
            key, value = argument
            content[key] = value
            path.write_text(json.dumps(content))
    elif kind == "json_junk":
        path.write_text(json.dumps(argument if isinstance(argument, (int, tuple)) else data[:10].hex()))
    elif kind == "bin_only":
        for weights in model.rglob("*.safetensors"):
            weights.rename(weights.with_name("pytorch_model.bin"))
    elif kind == "extra_bin":
        (model / "pytorch_model.bin").write_bytes(b"pickle? never")


@FUZZ
@given(data=st.data())
def test_fuzzed_model_directories(tiny_model_dir, data):
    files = sorted(str(p.relative_to(tiny_model_dir)) for p in tiny_model_dir.rglob("*") if p.is_file())
    changes = data.draw(st.lists(model_damage(files), min_size=1, max_size=3))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        model = workdir / "model"
        shutil.copytree(tiny_model_dir, model)
        for change in changes:
            damage(model, *change)
        sentences = workdir / "in.txt"
        sentences.write_text("a first sentence\nand a second one\n\nthe fourth line, after an empty one\n")
        out = workdir / "out.npy"
        inputs = {model: snapshot(model), sentences: snapshot(sentences)}
        outcome = run_cli(["encode", str(model), "--in", str(sentences), "--out", str(out), "--device", "cpu"])
        check_contract(outcome, "encode", inputs, [out])
        if outcome.code == 0:
            import numpy as np

            assert np.load(out).shape[0] == 4  # one row per input line, the empty one included


@FUZZ
@given(data=CORPUS_BYTES)
def test_fuzzed_encode_inputs(tiny_model_dir, data):
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        sentences = workdir / "in.txt"
        sentences.write_bytes(data)
        out = workdir / "out.npy"
        inputs = {sentences: snapshot(sentences), tiny_model_dir: snapshot(tiny_model_dir)}
        outcome = run_cli(["encode", str(tiny_model_dir), "--in", str(sentences), "--out", str(out)])
        check_contract(outcome, "encode", inputs, [out])


# --- paths that are not what the option wants -------------------------------------------------------
# Folders named like recipes, binaries, folders holding stray files and directories that are no model
# (empty, a report, a run's checkpoints, an unfinished run), given to each option that takes a path.
# The error names what the path is; a folder named like a recipe never shadows the recipe.

PATH_KINDS = ["recipe_named_folder", "binary_file", "text_file", "safetensors_file", "stray_files_folder",
              "empty_folder", "report_folder", "checkpoints_folder", "unfinished_run_folder"]
CHEAP_RECIPES = ["simcse", "focal", "una", "una-infonce", "clear-del-word"]
STRAY_FILES = ["pytorch_model.bin", "weights.bin", "notes.txt", "model.pt", "tokenizer.json", "recipe.yaml", ".hidden"]
# What each kind is called when it is passed as a model.
MODEL_WORDS = {"recipe_named_folder": "an empty folder", "binary_file": "it is a file (binary",
               "text_file": "it is a file (text)", "safetensors_file": "it is a file (safetensors weights",
               "stray_files_folder": "but no config.json", "empty_folder": "an empty folder",
               "report_folder": "a `cselab report` folder", "checkpoints_folder": "a run's checkpoints folder",
               "unfinished_run_folder": "a training run's folder with no final model yet"}


@contextlib.contextmanager
def working_directory(folder: str):
    """contextlib.chdir of Python 3.11, for 3.10."""
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def make_path(workdir: Path, kind: str, recipe: str, payload: bytes, strays: list[str]) -> Path:
    path = workdir / (recipe if kind == "recipe_named_folder" else kind)
    if kind.endswith("_file"):
        path = path.with_suffix(".safetensors") if kind == "safetensors_file" else path
        # Binary for sure: bytes no text holds, then the fuzzer's.
        data = {"binary_file": b"\x00\x01\x02\xff\xfe" * 40 + payload, "text_file": b"just some notes\nabout it\n",
                "safetensors_file": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + payload}[kind]
        path.write_bytes(data)
        return path
    path.mkdir()
    if kind == "stray_files_folder":
        for name in strays:
            (path / name).write_bytes(payload)
    elif kind == "report_folder":
        (path / "report.md").write_text("# Report\n")
        (path / "plots").mkdir()
    elif kind == "checkpoints_folder":
        (path / "step-00000005").mkdir()
        (path / "step-00000005" / "state.json").write_text("{}")
    elif kind == "unfinished_run_folder":
        (path / "metrics.jsonl").write_text('{"step": 1}\n')
    return path


# Every kind for every option (CI: one fuzzed example each); the names, bytes and stray files are drawn.
@pytest.mark.parametrize("role", ["model", "corpus", "output_dir", "recipe"])
@pytest.mark.parametrize("kind", PATH_KINDS)
@settings(FUZZ, max_examples=DEEP or 1)
@given(recipe=st.sampled_from(CHEAP_RECIPES), payload=st.binary(min_size=1, max_size=64),
       strays=st.lists(st.sampled_from(STRAY_FILES), min_size=1, max_size=3, unique=True))
def test_fuzzed_paths_that_are_not_what_the_option_wants(kind, role, recipe, payload, strays):
    with tempfile.TemporaryDirectory() as tmp, working_directory(tmp):
        workdir = Path(tmp)
        path = make_path(workdir, kind, recipe, payload, strays)
        corpus = write_corpus(workdir, name="the-corpus.txt")
        inputs = {corpus: snapshot(corpus)} | ({path: snapshot(path)} if role != "output_dir" else {})
        if role == "model":
            sentences = workdir / "in.txt"
            sentences.write_text("a sentence\n")
            out = workdir / "out.npy"
            outcome = run_cli(["encode", str(path), "--in", str(sentences), "--out", str(out), "--device", "cpu"])
            check_contract(outcome, "encode", inputs, [out])
            assert outcome.code == 2 and MODEL_WORDS[kind] in outcome.err, outcome.err
            assert "a model directory holds config.json" in outcome.err
            return
        if role == "corpus":
            outcome, out_dir = train(workdir, path, [])
            check_contract(outcome, "train", inputs, [out_dir])
            if kind != "text_file":  # two lines of text: a corpus, if a small one
                expected = "not text" if kind.endswith("_file") else "is a directory, not a corpus file"
                assert outcome.code == 2 and expected in outcome.err, outcome.err
            return
        if role == "output_dir":
            argv = ["train", "--corpus", str(corpus), "--output-dir", path.name, "--max-steps", "1"]
            outcome = run_cli(argv + [item for key, value in PINNED.items() for item in ("--set", f"{key}={value}")])
            check_contract(outcome, "train", inputs, [])
            if kind.endswith("_file"):
                assert outcome.code == 2 and "is an existing file, not a folder" in outcome.err, outcome.err
            elif kind != "checkpoints_folder":  # whose made-up checkpoint may be refused, in one line
                assert outcome.code == 0, outcome.err
            return
        # role == "recipe": the path's own name, from the folder that holds it
        outcome, out_dir = train(workdir, corpus, ["--recipe", path.name])
        check_contract(outcome, "train", inputs, [out_dir])
        if kind == "recipe_named_folder":
            assert outcome.code == 0, outcome.err  # the shipped recipe, not the folder
        elif not kind.endswith("_file"):
            assert outcome.code == 2 and f"unknown recipe {path.name!r}" in outcome.err, outcome.err
