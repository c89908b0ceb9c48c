#!/usr/bin/env bash
# Every benchmark, one after another (each writes benchmarks/results/NAME.{json,md}).
# The 3-seed recipe study is long (hours on 2 CPU cores); pass --with-study to include it.
set -euo pipefail
cd "$(dirname "$0")/.."
python benchmarks/bench_train_st.py
python benchmarks/bench_scale.py
python benchmarks/bench_eval.py
python benchmarks/bench_augment.py
python benchmarks/bench_sda.py
python benchmarks/bench_una.py
if [ "${1:-}" = "--with-study" ]; then
  python benchmarks/bench_recipes.py
  python benchmarks/bench_una.py --study
fi
