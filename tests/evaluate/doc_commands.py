"""The whole `cselab ...` commands a Markdown doc shows, for tests that parse them."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def doc_commands(doc: Path) -> list[str]:
    """The `cselab ...` lines of the doc's code blocks and inline code, comments dropped."""
    text = doc.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    # Inline: whole commands only, not a mention ("`cselab eval`"), a message ("cselab eval: error") or a
    # synopsis ("[--dest DIR]"); a YAML list of mappings in a --set value ("=[{name: ...}]") is a command.
    inline = [c for c in re.findall(r"`(cselab [^`]+)`", text)
              if len(c.split()) >= 3 and not re.match(r"cselab \w+:", c) and not re.search(r"\[(?!\{)", c)]
    return [c for c in lines if c.startswith("cselab ")] + inline
