"""Paraphrasing with any Hugging Face sequence-to-sequence model.

AugCSE (Tang et al., 2022) counts model-based paraphrases among its "possible meaning
alteration" augmentations, and UNA pairs its hard negatives with PEGASUS paraphrases (10 beams).
This augmenter runs any ``AutoModelForSeq2SeqLM`` by Hub name or local path with beam search or
sampling. The documented default for online use is ``tuner007/pegasus_paraphrase`` (PEGASUS
fine-tuned for paraphrasing); T5 paraphrasers work too, with their task ``prefix`` (e.g.
``"paraphrase: "``). Without access to the Hub (as on this project's machines) pass a local
directory: ``build_augmenter("paraphrase", model="/path/to/model")``.

Determinism: generation runs under ``torch.random.fork_rng`` seeded from (seed, batch texts), so
sampling gives the same paraphrases for the same seed and batch, and the global torch RNG is left
untouched. Beam search is deterministic anyway.
"""
from __future__ import annotations

import functools
import random
from typing import Any, ClassVar

from cselab.augment.base import Augmenter, AugmenterUnavailable, check_positive_int, register_augmenter, sentence_seed
from cselab.errors import first_line

DEFAULT_MODEL = "tuner007/pegasus_paraphrase"
PICKS = ("first", "random")


@functools.lru_cache(maxsize=2)
def load_seq2seq(name_or_path: str, device: str = "cpu"):
    """(tokenizer, model) for a seq2seq model, loaded once per process and put in eval mode."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForSeq2SeqLM.from_pretrained(name_or_path, use_safetensors=True)  # never pickle
    except (OSError, ValueError) as exc:
        raise AugmenterUnavailable(
            f"paraphrase model {name_or_path!r} could not be loaded ({type(exc).__name__}: "
            f"{first_line(exc, 200)}); a Hub name needs the Hugging Face Hub, otherwise pass a local "
            f"directory with model=...") from exc
    return tokenizer, model.to(device).eval()


@register_augmenter
class Paraphrase(Augmenter):
    """Rewrite each sentence with a seq2seq paraphraser (default ``tuner007/pegasus_paraphrase``).

    ``num_beams`` / ``num_return_sequences`` / ``do_sample`` / ``temperature`` / ``top_k`` /
    ``top_p`` / ``max_length`` go to ``model.generate``, as do any ``generation_kwargs``. Of the
    ``num_return_sequences`` candidates, ``pick="first"`` takes the best-scoring one that differs
    from the input and ``pick="random"`` draws one of those with the per-sentence seeded RNG. An
    input with no differing candidate comes back unchanged. ``prefix`` is prepended to inputs
    (T5 paraphrasers expect one, e.g. ``"paraphrase: "``).
    """
    citation = ""  # a generic paraphraser: no method paper of its own

    name: ClassVar[str] = "paraphrase"
    tag: ClassVar[str] = "possibly-altering"
    description: ClassVar[str] = "paraphrase with a Hugging Face seq2seq model (default tuner007/pegasus_paraphrase)"

    def __init__(self, model: str = DEFAULT_MODEL, num_beams: int = 5, num_return_sequences: int = 1,
                 do_sample: bool = False, temperature: float = 1.0, top_k: int = 50, top_p: float = 1.0,
                 max_length: int = 64, batch_size: int = 16, prefix: str = "", pick: str = "first",
                 device: str = "auto", generation_kwargs: dict[str, Any] | None = None, progress: bool | None = None):
        self.model = model
        self.num_beams = check_positive_int(self.name, "num_beams", num_beams, minimum=1)
        self.num_return_sequences = check_positive_int(self.name, "num_return_sequences", num_return_sequences,
                                                       minimum=1)
        if not do_sample and self.num_return_sequences > self.num_beams:
            raise ValueError(f"augmenter {self.name}: num_return_sequences ({num_return_sequences}) cannot exceed "
                             f"num_beams ({num_beams}) without sampling")
        if pick not in PICKS:
            raise ValueError(f"augmenter {self.name}: pick must be one of {PICKS}, got {pick!r}")
        if temperature <= 0 or not 0 < top_p <= 1:
            raise ValueError(f"augmenter {self.name}: need temperature > 0 and 0 < top_p <= 1, "
                             f"got temperature={temperature}, top_p={top_p}")
        self.do_sample = bool(do_sample)
        self.temperature = float(temperature)
        self.top_k = check_positive_int(self.name, "top_k", top_k, minimum=0)
        self.top_p = float(top_p)
        self.max_length = check_positive_int(self.name, "max_length", max_length, minimum=1)
        self.batch_size = check_positive_int(self.name, "batch_size", batch_size, minimum=1)
        self.prefix = prefix
        self.pick = pick
        from cselab.hardware import resolve_device

        self.device = resolve_device(device, f"augmenter {self.name}: device")  # auto: the GPU when there is one
        self.generation_kwargs = dict(generation_kwargs or {})
        self.progress = progress
        # Loaded on the CPU (a missing model fails here, before training); moved to the GPU at its first
        # use, and only outside DataLoader workers: see _run_device.
        self._tokenizer, self._model = load_seq2seq(model, "cpu")

    def _run_device(self):
        """Where this process generates: ``device``, except in a DataLoader worker, which runs on the CPU.

        Training makes a step's views in forked loader workers (data/views.py per step, or a ``cached``
        positive's fallback for lines its file lacks), and a forked process cannot use CUDA once the
        parent has ("Cannot re-initialize CUDA in forked subprocess"). So the model stays on the CPU
        until a process that may use the GPU (``cselab augment``, the main process) runs it: the
        workers never hold a CUDA model. Spawned workers would avoid the error but copy the model
        into each worker and share one GPU with training; the fast route for a GPU paraphraser is
        ``cselab augment`` first, read back by the ``cached`` augmenter (docs/augmentations.md)."""
        import torch

        if self.device.type != "cpu" and torch.utils.data.get_worker_info() is not None:
            return torch.device("cpu")
        return self.device

    def _generate_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"num_beams": self.num_beams, "num_return_sequences": self.num_return_sequences,
                                  "max_length": self.max_length, "do_sample": self.do_sample}
        if self.do_sample:
            kwargs.update(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p)
        kwargs.update(self.generation_kwargs)
        return kwargs

    def _candidates(self, batch: list[str], seed: int) -> list[list[str]]:
        import torch

        tokenizer = self._tokenizer
        device = self._run_device()
        # The GPU copy is a model of its own (loaded once per process): the CPU one, which forked
        # workers inherit, never moves to CUDA.
        model = self._model if device.type == "cpu" else load_seq2seq(self.model, str(device))[1]
        encoded = tokenizer([self.prefix + s.strip() for s in batch], return_tensors="pt", padding=True,
                            truncation=True, max_length=self.max_length).to(device)
        encoded.pop("token_type_ids", None)  # BERT-style tokenizers add it; seq2seq models do not take it
        # Sampling draws from a generator of its own device, seeded per batch; forking it leaves the
        # training run's RNG (dropout) exactly where it was, on the CPU and on a GPU.
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(sentence_seed(seed, "\n".join(batch)))
            generated = model.generate(**encoded, **self._generate_kwargs())
        texts = [t.strip() for t in tokenizer.batch_decode(generated, skip_special_tokens=True)]
        k = self.num_return_sequences
        return [texts[j * k:(j + 1) * k] for j in range(len(batch))]

    def _choose(self, sentence: str, candidates: list[str], seed: int) -> str:
        original = sentence.strip()
        different = [c for c in candidates if c and c != original]
        if not different:
            return sentence
        if self.pick == "first":
            return different[0]
        return different[random.Random(sentence_seed(seed, sentence)).randrange(len(different))]

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        out = list(sentences)
        todo = [i for i, s in enumerate(sentences) if s.strip()]
        if not todo:
            return out
        from tqdm.auto import tqdm

        show = self.progress if self.progress is not None else len(todo) >= 200
        with tqdm(total=len(todo), desc=self.name, unit="sent", disable=not show) as bar:
            for start in range(0, len(todo), self.batch_size):
                chunk = todo[start:start + self.batch_size]
                batch = [sentences[i] for i in chunk]
                for i, candidates in zip(chunk, self._candidates(batch, seed), strict=True):
                    out[i] = self._choose(sentences[i], candidates, seed)
                bar.update(len(chunk))
        return out

    def __repr__(self) -> str:
        return (f"Paraphrase(model={self.model!r}, num_beams={self.num_beams}, "
                f"num_return_sequences={self.num_return_sequences}, do_sample={self.do_sample}, pick={self.pick!r})")
