"""The layers of docs/architecture.md hold: a module imports only from its own layer or those below
(imports inside functions included), and no modules import each other in a circle."""
from __future__ import annotations

import ast
from pathlib import Path

import cselab

SOURCE = Path(cselab.__file__).parent
# docs/architecture.md's table, bottom up: a package (or module) name -> its layer.
LAYERS = {
    "registry": 1, "errors": 1, "hardware": 1, "wordnet_data": 1, "citations": 1, "sources": 1,
    "run_files": 1, "file_writes": 1,
    "augment": 2, "losses": 2, "model": 2, "speed": 2,
    "evaluate": 3, "st": 3, "__init__": 3,
    "config": 4,
    "data": 5,
    "train": 6,
    "cli": 7, "augment_command": 7, "experiments": 7,
}


def module_name(file: Path) -> str:
    parts = file.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    return LAYERS[top]


def imports() -> dict[str, set[str]]:
    modules = {module_name(f): f for f in SOURCE.rglob("*.py")}
    graph = {}
    for name, file in modules.items():
        found = set()
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from cselab import citations` imports the module cselab.citations, not the package
                found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                          for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_every_top_level_module_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in SOURCE.iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert tops - set(LAYERS) == set()


def test_no_import_goes_up_a_layer():
    upward = sorted(f"{a} -> {b}" for a, targets in imports().items() for b in targets if layer(b) > layer(a))
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    graph = imports()
    state: dict[str, int] = {}
    circles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []
