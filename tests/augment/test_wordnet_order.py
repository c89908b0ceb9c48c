"""WordNet's hypernym and hyponym replacements give the same output in every process: NLTK gathers some
related synsets through a set, whose order follows Python's string hashing (PYTHONHASHSEED, different
in each process unless set), so a seeded choice among them differed between data-loader workers and
between a run and its resume."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
from cselab.augment import build_augmenter
sentence = "The happy young man quickly bought a new car, but he did not drive it to the old city."
for name in ("hyponym_replacement", "hypernym_replacement"):
    print(build_augmenter(name).augment([sentence], 0)[0])
"""


@pytest.mark.slow
def test_the_same_seed_gives_the_same_replacement_whatever_the_hash_seed():
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1]
    assert "man" not in outputs[0].split("\n")[0].split() or "car" not in outputs[0].split("\n")[0].split()
