"""The training loop: batch -> forward -> objective terms -> backward -> evaluate -> checkpoint.

One readable function over ``accelerate``. Every method is the same loop with a different recipe:
the views say which texts form a step, the objective terms say what is minimised.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from cselab.config import Config, ConfigError
from cselab.data.collate import Batch, Collator, StepDataset, StepPlan
from cselab.data.corpus import corpus_fingerprint, read_corpus
from cselab.data.views import ViewBuilder
from cselab.evaluate.dev import StsbDev, find_senteval_dir
from cselab.losses import build_objective
from cselab.losses.base import StepOutputs
from cselab.model.encoder import SentenceEncoder
from cselab.model.heads import build_head
from cselab.train import checkpoint as ckpt
from cselab.train.cpu_speed import reuse_freed_memory, use_fast_dropout, use_persistent_embedding_grad
from cselab.train.distributed import gather_outputs, world_size
from cselab.train.flops import matmul_peak_flops, non_embedding_parameters, training_flops
from cselab.train.gradcache import grad_cache_backward

log = logging.getLogger("cselab.train")


class TrainingError(RuntimeError):
    """Training stopped on a fault (non-finite loss or gradient); the message names the step."""


RUN_CONFIG = "train_config.json"  # the resolved recipe (config.json is the saved model's own)
BEST_MODEL = "best_model.json"  # written after the best model's files: absent = that save was cut short


@dataclass
class StopFlag:
    """Set by SIGINT/SIGTERM: finish the current step, save, and exit cleanly."""

    requested: bool = False
    signal_name: str = ""


def build_encoder(config: Config) -> SentenceEncoder:
    m = config.model
    mlp = None if m.mlp == "auto" else m.mlp == "true"
    if m.from_config is not None:
        pooler = "cls" if m.pooler == "auto" else m.pooler
        return SentenceEncoder.from_config(m.from_config, m.name_or_path, pooler=pooler, mlp=mlp,
                                           mlp_only_train=m.mlp_only_train, max_seq_len=m.max_seq_len)
    return SentenceEncoder.from_pretrained(m.name_or_path, pooler=m.pooler, mlp=m.mlp,
                                           mlp_only_train=m.mlp_only_train, max_seq_len=m.max_seq_len,
                                           trust_remote_code=m.trust_remote_code)


def make_scheduler(optimizer, schedule: str, warmup_steps: int, total_steps: int):
    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def plan_steps(corpus, config: Config, processes: int = 1) -> StepPlan:
    """Every step of the run; with P processes a step is P x batch_size sentences (global batch)."""
    grouping = config.data.length_grouping
    lengths = None
    if grouping > 1:
        lengths = corpus.approximate_lengths() if hasattr(corpus, "approximate_lengths") else [len(s) for s in corpus]
    return StepPlan(len(corpus), config.optim.batch_size * processes, config.optim.epochs, config.train.seed,
                    config.optim.max_steps, lengths=lengths, length_grouping=grouping, drop_last=processes > 1)


def make_optimizer(parameters, config: Config) -> torch.optim.Optimizer:
    # The fused kernel updates all parameters in one pass (CPU and GPU); fall back where missing.
    try:
        return torch.optim.AdamW(parameters, lr=config.optim.lr, weight_decay=config.optim.weight_decay, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(parameters, lr=config.optim.lr, weight_decay=config.optim.weight_decay)


def clip_gradients(parameters: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """The gradients' total norm, after scaling them to ``max_norm`` (0: no clipping) as
    ``clip_grad_norm_`` does; but a step whose norm is within the limit does not multiply every
    gradient by a coefficient of 1 (a pass over all parameters, ~1% of a CPU step)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads)
    # clip_grad_norm_'s coefficient is max_norm / (norm + 1e-6), clamped to 1.
    if max_norm and norm + 1e-6 > max_norm:
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    return norm


def term_sizes(encoder: SentenceEncoder, head: torch.nn.Module, config: Config) -> dict:
    """Sizes a term may need for its own parameters (discriminator, MLM head), known before step 1."""
    with torch.no_grad():
        was_training = head.training
        head.eval()
        embedding_size = head(torch.zeros(2, encoder.hidden_size)).shape[-1]
        head.train(was_training)
    embeddings = encoder.backbone.get_input_embeddings()
    return {"embedding_size": embedding_size, "hidden_size": encoder.hidden_size,
            "vocab_size": embeddings.weight.shape[0] if embeddings is not None else encoder.backbone.config.vocab_size,
            "num_labels": len(config.views.label) + 1 if config.views.label else None}


_PEAKS: dict = {}  # (dtype, device) -> (highest probe, when it was last probed)
REPROBE_SECONDS = 600.0  # the peak is probed again this often, and sooner when a window beats it,
REPROBE_MIN_SECONDS = 120.0  # but not more often than this: a probe costs a second


def measured_peak(dtype: torch.dtype, device: str, achieved: float = 0.0) -> float:
    """The matmul peak of this machine: the highest of this process's one-second probes.

    The first call probes; later calls probe again after :data:`REPROBE_SECONDS`, or after
    :data:`REPROBE_MIN_SECONDS` when ``achieved`` (a window's FLOP/s) beats the peak. A virtual
    machine's speed drifts by 10-20% over minutes, and a probe that caught a slow second would
    overstate every MFU after it.
    """
    peak, probed_at = _PEAKS.get((dtype, device), (0.0, None))
    since = None if probed_at is None else time.perf_counter() - probed_at
    if since is None or since > REPROBE_SECONDS or (achieved > peak and since > REPROBE_MIN_SECONDS):
        peak = max(peak, matmul_peak_flops(dtype, seconds=1.0, device=device))
        _PEAKS[(dtype, device)] = (peak, time.perf_counter())
    return peak


def average_gradients(module: torch.nn.Module) -> None:
    """What DDP does after backward: every process ends with the mean gradient."""
    import torch.distributed as dist

    # One collective per dtype over a flat copy: a call per tensor pays the collective's latency
    # a hundred times a step, which on CPU (gloo) costs more than the bytes themselves.
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for p in module.parameters():
        if p.grad is not None:
            by_dtype.setdefault(p.grad.dtype, []).append(p.grad)
    for grads in by_dtype.values():
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world_size()
        for g, part in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(part.view_as(g))


def split_roles(embeddings: torch.Tensor, batch: Batch, features: dict, encoder: SentenceEncoder) -> StepOutputs:
    roles = batch.roles
    # Terms that run their own pass (MLM) read the tokenised batch and the encoder from extra.
    outputs = StepOutputs(anchor=embeddings[roles["anchor"]], positive=embeddings[roles["positive"]],
                          extra={"features": features, "roles": roles, "encoder": encoder, "step": batch.step})
    if "negative" in roles:
        outputs.negative = embeddings[roles["negative"]]
    if "label_view" in roles:
        outputs.extra["label_view"] = embeddings[roles["label_view"]]
        outputs.extra["labels"] = torch.tensor(batch.views.labels, device=embeddings.device)
    if "original_features" in batch.extra:
        outputs.extra["original_features"] = {k: v.to(embeddings.device) for k, v in batch.extra["original_features"].items()}
    return outputs


def start_or_resume(out_dir: Path, config: Config, resume: bool) -> Path | None:
    """The checkpoint to resume from, after checking it belongs to this config; None = start over.

    Starting over clears the directory's old checkpoints and metrics, so a later resume can never
    pick up a checkpoint of an earlier, different run.
    """
    checkpoint_dir = out_dir / "checkpoints"
    latest = ckpt.latest_valid_checkpoint(checkpoint_dir) if resume else None
    if latest is None:
        for old in [*checkpoint_dir.glob("step-*"), *checkpoint_dir.glob(".step-*.tmp")]:
            shutil.rmtree(old, ignore_errors=True)
        (out_dir / "metrics.jsonl").unlink(missing_ok=True)
        (out_dir / BEST_MODEL).unlink(missing_ok=True)
        return None
    differing = ckpt.config_differences(ckpt.read_state(latest).get("config"), config.to_dict())
    if differing:
        raise ConfigError(f"{out_dir}: its checkpoint {latest.name} was made with a different "
                          f"{', '.join(differing)}; run with the same settings to resume, or pass --no-resume "
                          f"(or another train.output_dir) to start over")
    return latest


def trim_metrics(path: Path, last_step: int) -> None:
    """Keep the records up to ``last_step`` (the resume point), so a resumed run adds no duplicates."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            if json.loads(line)["step"] <= last_step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            pass  # a record cut short by the crash
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    os.replace(tmp, path)


def save_best_model(model: SentenceEncoder, out_dir: Path, step: int, score: float) -> None:
    """Write the best model into ``out_dir``; its marker file comes last and names the step."""
    (out_dir / BEST_MODEL).unlink(missing_ok=True)
    model.save(out_dir)
    ckpt.write_json_atomic(out_dir / BEST_MODEL, {"step": step, "stsb_dev": score})


def reconcile_best_model(out_dir: Path, state: dict, model: SentenceEncoder) -> None:
    """Make ``state`` and the best model in ``out_dir`` agree after resuming from ``state["step"]``.

    A best model saved after the checkpoint (and completely written) is kept and adopted; one whose
    save was cut short is rewritten from the checkpoint's weights when they are that model.
    """
    if state["best_step"] is None and not (out_dir / BEST_MODEL).is_file():
        return
    try:
        marker = json.loads((out_dir / BEST_MODEL).read_text())
    except (OSError, ValueError):
        marker = None
    if marker is not None and state["best_step"] is not None and marker["step"] == state["best_step"]:
        return
    if marker is not None and marker["step"] > state["step"]:
        state["best_dev"], state["best_step"] = marker["stsb_dev"], marker["step"]
    elif state["best_step"] == state["step"]:
        save_best_model(model, out_dir, state["best_step"], state["best_dev"])
    else:
        log.warning("the best model in %s was being written when the run stopped; the replayed steps rewrite it "
                    "(exactly so only when training is deterministic, e.g. fp32 on CPU)", out_dir)


def check_finite_parameters(module: torch.nn.Module, step: int, out_dir: Path) -> None:
    if not all(torch.isfinite(p).all() for p in module.parameters()):
        raise TrainingError(f"step {step}: the weights are no longer finite; no checkpoint written. "
                            f"Resume from the last good checkpoint in {out_dir / 'checkpoints'} with a lower optim.lr")


def quiet_worker(_worker_id: int) -> None:
    """Data-loader workers ignore Ctrl-C/SIGTERM: the main process stops them after saving."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def train(config: Config, resume: bool = True, progress: bool = True) -> dict:
    """Train as ``config`` says; returns the run summary (also written to summary.json)."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out_dir = Path(config.train.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    accelerator = Accelerator(mixed_precision="no", cpu=not torch.cuda.is_available())
    main = accelerator.is_main_process  # only the main process writes files and evaluates
    # Before any work: a resume with different settings is refused, starting over clears old state.
    if main:
        latest = start_or_resume(out_dir, config, resume)
        ckpt.write_json_atomic(out_dir / RUN_CONFIG, config.to_dict())
    accelerator.wait_for_everyone()
    if not main:
        latest = ckpt.latest_valid_checkpoint(out_dir / "checkpoints") if resume else None
    set_seed(config.train.seed)
    started = time.time()

    # Data and model.
    corpus, corpus_stats = read_corpus(config.data.corpus, config.data.column, config.data.max_sentences,
                                       seed=config.train.seed)
    log.info("corpus: %s", corpus_stats.summary())
    view_builder = ViewBuilder(config.views, corpus, config.train.seed)
    encoder = build_encoder(config)
    # Before the term sizes and the optimizer: new tokens grow the embedding matrix.
    added = encoder.add_special_tokens(view_builder.special_tokens)
    if added:
        log.info("added to the vocabulary: %s", ", ".join(added))
    head = build_head(config.model.projection, encoder.hidden_size, **config.model.projection_params)
    objective = build_objective(config.objective, term_sizes(encoder, head, config))
    # Index 0 is the encoder, 1 the training-only head, then each term's own parameters.
    trainable = torch.nn.ModuleList([encoder, head, *[term for _, _, term in objective]])
    # With P processes each takes batch_size rows of a global batch of P x batch_size; gathering
    # embeddings makes the in-batch negatives span the global batch (train/distributed.py).
    processes = world_size()
    steps = plan_steps(corpus, config, processes)
    total_steps = len(steps)
    trainable.to(accelerator.device)
    optimizer = make_optimizer([p for p in trainable.parameters() if p.requires_grad], config)
    scheduler = make_scheduler(optimizer, config.optim.schedule,
                               int(config.optim.warmup_ratio * total_steps), total_steps)
    model = encoder
    if config.train.fast_cpu and accelerator.device.type == "cpu":
        # Compiled, torch's dropout draws its masks inside inductor's fused kernels; fast_dropout's
        # in-place random_ would break the graph at every dropout instead.
        if not config.train.compile:
            use_fast_dropout(model.backbone)
        reuse_freed_memory()
        use_persistent_embedding_grad(model.backbone)
    if config.train.unpad and not model.use_unpadded():
        log.warning("train.unpad: %s has no BERT-style layers; it runs padded", type(model.backbone).__name__)
    if config.train.compile:
        model.backbone.compile(dynamic=True)  # in place: parameter names (and checkpoints) unchanged

    # Resume from the last complete checkpoint of this output directory: weights, optimiser,
    # scheduler, RNG (dropout) and the data position, which is the step itself.
    checkpoint_dir = out_dir / "checkpoints"
    fingerprint = corpus_fingerprint(corpus)
    state = {"step": 0, "best_dev": None, "best_step": None, "first_loss": None, "last_loss": None,
             "sentences_seen": 0, "train_seconds": 0.0, "corpus_sha256": fingerprint}
    if latest is not None:
        state.update(ckpt.load_checkpoint(latest, trainable, optimizer, scheduler))
        if state["corpus_sha256"] != fingerprint:
            raise ConfigError(f"{config.data.corpus}: the corpus changed since checkpoint {latest}; restore it, "
                              f"or pass --no-resume (or another train.output_dir) to start over")
        accelerator.print(f"resuming from {latest} (step {state['step']} of {total_steps})")
        if main:
            reconcile_best_model(out_dir, state, model)
    start_step = state["step"]
    if main:
        trim_metrics(out_dir / "metrics.jsonl", start_step)

    dev_dir = find_senteval_dir(config.data.dev_dir)
    dev = StsbDev(dev_dir) if dev_dir is not None and config.train.eval_steps > 0 and main else None
    if dev is None and config.train.eval_steps > 0 and main:
        accelerator.print("no STS-B dev data found: the final model is the last step "
                          "(`cselab data download` fetches it; or set data.dev_dir)")
    precision = config.train.precision
    autocast = torch.autocast(accelerator.device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16,
                              enabled=precision != "fp32")

    def evaluate() -> float:
        return dev.score(lambda s: model.encode(s, batch_size=128, precision=precision))

    loader = torch.utils.data.DataLoader(
        StepDataset(corpus, steps, start_step, accelerator.process_index, processes), batch_size=None, shuffle=False,
        collate_fn=Collator(model.tokenize, view_builder), num_workers=config.train.num_workers,
        persistent_workers=False, worker_init_fn=quiet_worker,
        # Its own generator: starting the loader must not draw from the restored dropout RNG.
        generator=torch.Generator().manual_seed(config.train.seed))

    # Hardware efficiency: model FLOP/s against this machine's measured matmul peak.
    matmul_dtype = torch.bfloat16 if precision == "bf16" else torch.float16 if precision == "fp16" else torch.float32
    measured_peak(matmul_dtype, accelerator.device.type)  # probed before the first step
    flop_params = non_embedding_parameters(model)
    window = {"flops": 0.0, "seconds": 0.0, "tokens": 0, "padded": 0}

    stop = StopFlag()

    def on_signal(signum, _frame):
        if stop.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, resume from the last checkpoint
        stop.requested, stop.signal_name = True, signal.Signals(signum).name

    # Handlers can only be installed from the main thread (train() may run in another one).
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if in_main_thread else {}
    metrics_file = open(out_dir / "metrics.jsonl" if main else os.devnull, "a", encoding="utf-8")
    bar = None
    if progress and accelerator.is_main_process:
        from tqdm.auto import tqdm

        bar = tqdm(total=total_steps, initial=start_step, desc=f"train {config.recipe}", unit="step")
    step = start_step
    # A resume must keep the settings, so the remedy is a new run (--no-resume) with other ones.
    advice = "lower optim.lr" + ("" if precision == "fp32" else " or use train.precision=fp32") + " and run with --no-resume"
    try:
        trainable.train()
        for batch in loader:
            step = batch.step
            tick = time.perf_counter()
            # One forward over every view of the step (anchors, positives, negatives, ...).
            features = {k: v.to(accelerator.device) for k, v in batch.features.items()}
            logs: dict[str, float] = {}

            def step_loss(embeddings: torch.Tensor) -> torch.Tensor:
                outputs = gather_outputs(split_roles(embeddings, batch, features, model))
                total = torch.zeros((), device=accelerator.device)
                for name, weight, term in objective:
                    term_loss, term_logs = term(outputs)
                    total = total + weight * term_loss
                    logs.update(term_logs)
                return total

            def encode(rows: dict) -> torch.Tensor:
                with autocast:
                    return head(model(rows))

            done = step + 1
            if config.optim.grad_cache_chunk:
                # Backward happens inside, chunk by chunk; the finite checks below still guard the update.
                loss = grad_cache_backward(encode, features, config.optim.grad_cache_chunk,
                                           lambda e: step_loss(e) * processes)
                loss = loss / processes
            else:
                loss = step_loss(encode(features))
            if not torch.isfinite(loss):
                raise TrainingError(f"step {done}: loss is {loss.item()}; stopped before updating the weights. "
                                    f"Checkpoints and the best model so far stay in {out_dir} ({advice})")
            if not config.optim.grad_cache_chunk:
                # x P undoes the averaging below: P processes x batch B give the gradients of one batch P x B.
                accelerator.backward(loss * processes)
            if processes > 1:
                average_gradients(trainable)
            grad_norm = clip_gradients(list(trainable.parameters()), config.optim.max_grad_norm)
            if not torch.isfinite(torch.as_tensor(grad_norm)):
                raise TrainingError(f"step {done}: gradient norm is {float(grad_norm)}; stopped before updating the "
                                    f"weights. Checkpoints and the best model so far stay in {out_dir} ({advice})")
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            seconds = time.perf_counter() - tick
            state["train_seconds"] += seconds
            state["sentences_seen"] += batch.num_sentences * processes
            real_tokens = int(features["attention_mask"].sum()) * processes
            window["flops"] += training_flops(flop_params, real_tokens)
            window["seconds"] += seconds
            window["tokens"] += real_tokens
            window["padded"] += features["attention_mask"].numel() * processes

            record = {"step": done, "loss": loss.item(), "lr": scheduler.get_last_lr()[0], **logs}
            if dev is not None and (done % config.train.eval_steps == 0 or done == total_steps):
                record["stsb_dev"] = evaluate()
                if state["best_dev"] is None or record["stsb_dev"] > state["best_dev"]:
                    state["best_dev"], state["best_step"] = record["stsb_dev"], done
                    save_best_model(model, out_dir, done, record["stsb_dev"])  # SimCSE keeps only the best
                trainable.train()
            if done % config.train.log_steps == 0 or "stsb_dev" in record or done == total_steps:
                # FLOPs of real (unpadded) tokens; the MLM term's own pass is not counted.
                rate = window["flops"] / window["seconds"] / processes
                record["model_tflops"] = window["flops"] / window["seconds"] / 1e12
                record["mfu"] = rate / measured_peak(matmul_dtype, accelerator.device.type, achieved=rate)
                record["padding"] = 1 - window["tokens"] / window["padded"]
                window.update(flops=0.0, seconds=0.0, tokens=0, padded=0)
                metrics_file.write(json.dumps(record) + "\n")
                metrics_file.flush()
            state["last_loss"] = loss.item()
            if state["first_loss"] is None:
                state["first_loss"] = loss.item()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss.item():.4f}", **({"dev": f"{record['stsb_dev']:.2f}"} if "stsb_dev" in record else {}))
            state["step"] = done
            if done == total_steps and dev is None and main:
                model.save(out_dir)  # no dev set: the final model is the last step's
            # The last step is checkpointed too, so running a finished command again redoes nothing.
            every = config.train.save_steps
            if (every and (done % every == 0 or done == total_steps)) or stop.requested:
                check_finite_parameters(trainable, done, out_dir)
                if main:
                    ckpt.save_checkpoint(checkpoint_dir, done, trainable, optimizer, scheduler,
                                         {k: v for k, v in state.items() if k != "step"}, config.to_dict())
                accelerator.wait_for_everyone()
            if stop.requested:
                accelerator.print(f"\n{stop.signal_name}: stopped after step {done}; checkpoint saved. "
                                  f"Run the same command again to resume.")
                break
    finally:
        metrics_file.close()
        if bar is not None:
            bar.close()
        for s, handler in previous.items():
            signal.signal(s, handler)

    finished = state["step"] >= total_steps
    summary = {
        "recipe": config.recipe,
        "output_dir": str(out_dir),
        "finished": finished,
        "steps": state["step"],
        "total_steps": total_steps,
        "corpus": corpus_stats.to_dict(),
        "first_loss": state["first_loss"],
        "final_loss": state["last_loss"],
        "best_stsb_dev": state["best_dev"],
        "best_step": state["best_step"],
        "train_seconds": round(state["train_seconds"], 2),
        "sentences_per_second": round(state["sentences_seen"] / state["train_seconds"], 2) if state["train_seconds"] else None,
        "wall_seconds": round(time.time() - started, 2),
    }
    if main:
        ckpt.write_json_atomic(out_dir / "summary.json", summary)
    return summary
