#!/usr/bin/env bash
# One-command setup for cselab on a fresh Debian/Ubuntu machine with Python >= 3.10.
#   bash scripts/setup.sh            # everything: WordNet (Debian), torch CPU, cselab with extras
# torch==2.13.0 is installed first so that no dependency pulls a CUDA build of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  # WordNet for the lexical augmenters and the default corpus; Chromium for the report's browser test.
  if ! dpkg -s wordnet-base wordnet-sense-index chromium >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base wordnet-sense-index chromium >/dev/null
  fi
else
  echo "note: not root or no apt-get; install Debian's wordnet-base, wordnet-sense-index (and chromium for the report test)" >&2
fi

"$PYTHON" -m pip install -q "torch==2.13.0"
"$PYTHON" -m pip install -q -e ".[all,test]"
# NLTK reads WordNet from its own data layout: copy Debian's files there once.
"$PYTHON" -m cselab.augment.wordnet --setup || echo "note: WordNet setup skipped (see above)" >&2
echo "cselab setup done: $("$PYTHON" -m cselab.cli --version)"
