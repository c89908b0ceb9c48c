"""``cselab push``: a saved model to the Hugging Face Hub, with ``huggingface_hub``'s own client.

The token comes from where ``huggingface_hub`` looks (``HF_TOKEN``, the file ``hf auth login`` /
``huggingface-cli login`` writes); offline (``HF_HUB_OFFLINE``), without a token, or with the Hub
out of reach, the push stops with one line naming what is missing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from cselab.errors import CselabError, first_line
from cselab.model.card import write_card
from cselab.model.files import CSELAB_CONFIG
from cselab.run_files import CHECKPOINTS, KEPT_DIR, LOCK
from cselab.sources import hub_offline

# A training run's directory holds more than its final model: these stay local.
NOT_UPLOADED = [f"{CHECKPOINTS}/*", f"{KEPT_DIR.format(metric='*')}/*", LOCK, "*.tmp", "*.part"]


class PushError(CselabError, RuntimeError):
    """The model cannot be pushed: not a saved model, a bad repository id, offline, no token, Hub refused."""


def remember_repository(path: Path, repo_id: str) -> None:
    """``cselab_config.json`` names the repository, so the card's usage keeps loading it when rewritten."""
    file = path / CSELAB_CONFIG
    try:
        settings = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
    except ValueError:
        raise PushError(f"{file}: not valid JSON; save the model again") from None
    file.write_text(json.dumps({**settings, "hub_repo": repo_id}, indent=2), encoding="utf-8")


def push(model_dir: str | os.PathLike, repo_id: str, private: bool = False) -> str:
    """Create ``repo_id`` (kept if it exists) and upload the model directory to it; returns its URL.
    The card's usage snippets are rewritten to load ``repo_id`` before the upload."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    path = Path(model_dir)
    if not (path / "modules.json").is_file():
        raise PushError(f"{path}: not a saved model (no modules.json); pass a directory cselab train or save wrote")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise PushError(f"{repo_id}: not a Hub repository id ({first_line(exc, 200)})") from None
    if "/" not in repo_id:
        raise PushError(f"{repo_id}: give the repository as OWNER/NAME (your user or organisation name first)")
    if hub_offline():
        raise PushError("the Hugging Face Hub is switched off here (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is "
                        "set); push where there is network, with it unset")
    token = get_token()
    if not token:
        raise PushError("no Hugging Face token: run `hf auth login` (or `huggingface-cli login`) or set HF_TOKEN "
                        "to a token with write access")
    remember_repository(path, repo_id)
    write_card(path)
    api = HfApi(token=token)
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(repo_id=repo_id, folder_path=str(path), repo_type="model", ignore_patterns=NOT_UPLOADED,
                          commit_message=f"cselab push of {path.resolve().name}")
    except Exception as exc:  # noqa: BLE001 - no network, refused token, no rights: all the Hub's answer, one line
        first = first_line(exc, 300)
        raise PushError(f"{repo_id}: the Hub could not be reached or refused the upload ({first})") from None
    return str(url)
