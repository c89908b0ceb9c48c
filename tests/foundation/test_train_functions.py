"""Issue 33's bound on the training code: no function in ``cselab.train`` takes more than five
parameters (``self``/``cls`` not counted; ``*args`` and ``**kwargs`` count one each). A function that
needs more is reading state that belongs to a component, or the config section it should take."""
from __future__ import annotations

import ast
from pathlib import Path

import cselab

TRAIN = Path(cselab.__file__).parent / "train"
MOST = 5


def parameter_counts() -> dict[str, int]:
    counts = {}
    for file in sorted(TRAIN.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
                if names[:1] in (["self"], ["cls"]):
                    names = names[1:]
                counts[f"{file.name}:{node.name}"] = len(names) + bool(args.vararg) + bool(args.kwarg)
    return counts


def test_counts_are_read_from_the_code():
    counts = parameter_counts()
    assert counts["loop.py:train"] == 5 and counts["checkpoint.py:restore"] == 2


def test_no_function_in_train_takes_more_than_five_parameters():
    assert {name: n for name, n in parameter_counts().items() if n > MOST} == {}
