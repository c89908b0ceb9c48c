"""Recipe files (shipped names or paths, ``inherit:``), ``--set key=value`` overrides, and
``load_config``/``config_from_dict``, which build and validate a Config."""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any

import yaml

from cselab.config.schema import Config, build_dataclass, parse_number
from cselab.config.validation import validate
from cselab.errors import ConfigError, counted, first_line
from cselab.registry import shown

RECIPE_DIR = Path(__file__).parent.parent / "recipes"


def looks_like_path(recipe: str) -> bool:
    """A recipe argument is a path when it is spelled like one (a YAML suffix or a folder separator);
    a bare name is a shipped recipe, so a folder of that name (a run's output directory) never shadows it."""
    return Path(recipe).suffix in (".yaml", ".yml") or any(sep in recipe for sep in ("/", os.sep))


def recipe_path(recipe: str, folder: Path | None = None) -> Path:
    """A recipe name shipped with cselab, or a path to a YAML file: one spelled like a path, or an
    existing file of that name. ``folder``: where a relative path is found (an ``inherit:`` is
    found next to the recipe file that names it; the command line's from the working directory)."""
    path = Path(recipe) if folder is None or Path(recipe).is_absolute() else folder / recipe
    if _is_file(path, recipe):
        return path
    if looks_like_path(recipe):
        what = "is a folder, not a recipe file" if path.is_dir() else "file not found"
        raise ConfigError(f"recipe: {what}: {path}")
    shipped = RECIPE_DIR / f"{recipe}.yaml"
    if not shipped.is_file():
        close = difflib.get_close_matches(recipe, list_recipes(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        names = ", ".join(list_recipes())
        raise ConfigError(f"recipe: unknown recipe {recipe!r} ({hint}shipped: {names}; or give a path to a YAML file)")
    return shipped


def _is_file(path: Path, recipe: str) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError) as exc:  # a name too long to look up, a NUL byte
        raise ConfigError(f"recipe: cannot use {shown(recipe)} as a file name ({exc})") from None


def list_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def refuse_aliases(text: str, source: str) -> None:
    """No YAML aliases: an alias bomb (a few lines that expand to gigabytes) is refused while
    parsing, in time and memory linear in the text. Malformed YAML is left to the loader."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise ConfigError(f"{source}: YAML aliases (*{event.anchor}) are not allowed; write the value out")
    except yaml.YAMLError:
        pass


def safe_yaml(text: str, source: str):
    """``yaml.safe_load`` of a recipe, aliases refused; one-line errors naming ``source``."""
    refuse_aliases(text, source)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {first_line(exc)}") from None
    except YAML_VALUE_ERRORS as exc:
        raise ConfigError(f"{source}: invalid YAML value ({type(exc).__name__}: {exc})") from None


# What PyYAML's constructors raise besides YAMLError: a date like 2001-13-01, `!!int x`,
# `!!timestamp x`, a number with more digits than Python converts; nesting deeper than the stack.
YAML_VALUE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, RecursionError)


def _recipe_text(path: Path) -> str:
    """The recipe file as text: UTF-8 (a BOM is dropped); anything else names the file and line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"recipe {path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"recipe {path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02X}); "
                          f"save the recipe as UTF-8") from None


def _read_recipe(recipe: str, seen: tuple = (), folder: Path | None = None) -> dict:
    path = recipe_path(recipe, folder)
    if path.resolve() in seen:
        raise ConfigError(f"recipe {path}: circular inherit of {recipe!r}")
    data = safe_yaml(_recipe_text(path), f"recipe {path}")
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"recipe {path}: top level must be a mapping")
    parent = data.pop("inherit", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ConfigError(f"recipe {path}: inherit: expected a recipe name or path, got {shown(parent)}")
    merged = _read_recipe(parent, seen + (path.resolve(),), folder=path.parent)
    _deep_merge(merged, data)
    return merged


def _deep_merge(into: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict) and not str(key).endswith("params"):
            _deep_merge(into[key], value)
        else:
            into[key] = value


def parse_override(item: str) -> tuple[list[str | int], Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. optim.lr=1e-5")
    key, raw = item.split("=", 1)
    refuse_aliases(raw, f"--set {key.strip()}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, *YAML_VALUE_ERRORS):
        value = raw  # not YAML: the text itself (its type is checked like any value)
    # YAML 1.1 reads "1e-5" as a string; numbers are what users mean.
    if isinstance(value, str):
        value = parse_number(value)
    return override_path(key.strip()), value


_INDEXED = re.compile(r"^([^\[\]]+)((?:\[\s*-?\d+\s*\])+)$")


def override_path(key: str) -> list[str | int]:
    """``objective[0].reduction`` -> ["objective", 0, "reduction"]: a list entry is named by its index."""
    path: list[str | int] = []
    for part in key.split("."):
        indexed = _INDEXED.match(part)
        if indexed:
            path += [indexed.group(1), *(int(i) for i in re.findall(r"-?\d+", indexed.group(2)))]
        else:
            path.append(part)
    return path


def _dotted(path: list[str | int]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def apply_override(data: dict, path: list[str | int], value: Any) -> None:
    node: Any = data
    shown = _dotted(path)
    for depth, part in enumerate(path):
        parent, last = _dotted(path[:depth]), depth == len(path) - 1
        if isinstance(part, int):
            if not isinstance(node, list):
                raise ConfigError(f"--set {shown}: {parent} is not a list")
            if not 0 <= part < len(node):
                span = f"indices run from 0 to {len(node) - 1}" if node else "it is empty"
                raise ConfigError(f"--set {shown}: {parent} has {counted(len(node), 'entry', 'entries')}, "
                                  f"so no [{part}] ({span})")
        elif not isinstance(node, dict):
            raise ConfigError(f"--set {shown}: {parent} is not a section")
        elif not part:
            raise ConfigError(f"--set {shown}=...: empty key name")
        elif not last and isinstance(path[depth + 1], int) and part not in node:
            here = _dotted(path[:depth + 1])
            raise ConfigError(f"--set {shown}: {here} is not in the recipe, so it has no entry [{path[depth + 1]}] "
                              f"(set the whole list: --set '{here}=[...]')")
        elif not last:
            node.setdefault(part, {})
        if last:
            node[part] = value
        else:
            node = node[part]


def load_config(recipe: str = "simcse", overrides: list[str] | None = None, **direct: Any) -> Config:
    """Read a recipe, apply ``--set`` overrides and direct keyword overrides, validate."""
    data = _read_recipe(recipe)
    data.setdefault("recipe", Path(recipe).stem)
    for item in overrides or []:
        path, value = parse_override(item)
        apply_override(data, path, value)
    for dotted, value in direct.items():
        if value is not None:
            apply_override(data, dotted.split("."), value)
    return validate(build_dataclass(Config, data))


def config_from_dict(data: dict) -> Config:
    return validate(build_dataclass(Config, dict(data)))
