"""The names cselab imports from the Hugging Face libraries exist, and pyproject.toml's lower bounds
are the releases that brought the latest of them (checked against each library's history)."""
from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import cselab

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
SRC = Path(cselab.__file__).parent
PYPROJECT = SRC.parents[1] / "pyproject.toml"
LIBRARIES = ("sentence_transformers", "transformers", "huggingface_hub", "accelerate")
# Each library's lower bound and what arrived in that release (the releases before it lack it).
BOUNDS = {
    "sentence-transformers": ("3.1", "Dense / WeightedLayerPooling .save(safe_serialization=...): 3.0 pickles them"),
    "huggingface_hub": ("0.20", "get_token (cselab push); HfApi.create_repo, upload_folder, validate_repo_id"),
    "transformers": ("4.40", "AutoModel.from_pretrained(use_safetensors=..., output_loading_info=True); "
                             "masking_utils and the attention interface only where set_attn_implementation exists"),
    # cselab imports nothing of accelerate's now (processes join with torch.distributed); transformers'
    # Trainer, which SentenceTransformerTrainer is, needs it to train cselab.st's losses.
    "accelerate": ("0.30", "transformers' Trainer (cselab.st's losses in SentenceTransformerTrainer); the "
                           "`accelerate launch` launcher (docs/scaling.md)"),
}


def imported_names() -> list[tuple[str, str, str | None]]:
    """(where, module, name) of every import from LIBRARIES in cselab's source."""
    found = []
    for file in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            where = f"{file.relative_to(SRC)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
                found += [(where, node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(where, alias.name, None) for alias in node.names if alias.name.split(".")[0] in LIBRARIES]
    return found


@pytest.mark.filterwarnings("ignore:Importing from:DeprecationWarning")  # the 3.1-5.3 path, an alias since 5.4
def test_every_name_cselab_imports_from_the_hugging_face_libraries_exists():
    names = imported_names()
    modules = {module for _, module, _ in names}
    assert {"sentence_transformers.models", "transformers", "huggingface_hub"} <= modules  # the scan finds them
    missing = []
    for where, module, name in names:
        try:
            imported = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{where}: {module} ({exc})")
            continue
        if name is not None and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{where}: {module}.{name}")
    assert not missing, missing


def test_the_sentence_transformers_modules_save_safetensors():
    from cselab.model.files import st_modules

    for module in st_modules():
        assert module.__name__ in ("Dense", "Pooling", "WeightedLayerPooling")
        if module.__name__ != "Pooling":  # Pooling has no weights
            assert "safe_serialization" in inspect.signature(module.save).parameters


def _lower_bounds() -> dict[str, Version]:
    dependencies = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    bounds = {}
    for line in dependencies:
        requirement = Requirement(line)
        lows = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==")]
        if lows:
            bounds[requirement.name.replace("_", "-").lower()] = max(lows)
    return bounds


@pytest.mark.parametrize("library", sorted(BOUNDS))
def test_pyproject_declares_the_release_that_brought_the_names_used(library):
    declared = _lower_bounds().get(library.replace("_", "-").lower())
    assert declared == Version(BOUNDS[library][0]), f"{library}: pyproject says >={declared}; needs {BOUNDS[library]}"
