"""docs/evaluation.md against the code: every `cselab` command in it parses, no path of one machine."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from cselab.cli import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluation.md"


def doc_commands() -> list[str]:
    """The `cselab ...` lines of the doc's code blocks and inline code, comments dropped."""
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    # Inline: whole commands only, not a mention ("`cselab eval`"), a message ("cselab eval: error") or a
    # synopsis ("[--dest DIR]").
    inline = [c for c in re.findall(r"`(cselab [^`]+)`", text)
              if len(c.split()) >= 3 and not re.match(r"cselab \w+:", c) and "[" not in c]
    return [c for c in lines if c.startswith("cselab ")] + inline


@pytest.mark.parametrize("command", doc_commands())
def test_every_command_in_the_doc_parses(command):
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert callable(args.func)


def test_the_doc_names_no_path_of_one_machine():
    text = DOC.read_text(encoding="utf-8")
    assert not re.findall(r"/work/|/root/|/home/\w+", text)
    assert len(doc_commands()) >= 10


def test_the_python_example_path_with_a_tilde_works(senteval_dir, tiny_encoder, monkeypatch):
    """The doc passes "~/.cache/cselab/senteval" to evaluate(): a tilde path is expanded."""
    from cselab.evaluate import evaluate

    monkeypatch.setenv("HOME", str(senteval_dir.parent))
    results = evaluate(tiny_encoder, f"~/{senteval_dir.name}", tasks="STSB", split="dev", progress=False)
    assert results["data_dir"] == str(senteval_dir.resolve()) and "STSBenchmark" in results["tasks"]
