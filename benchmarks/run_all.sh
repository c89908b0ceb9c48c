#!/usr/bin/env bash
# Every benchmark, one after another (each writes benchmarks/results/NAME.{json,md}).
# The two studies are long (hours on 2 CPU cores); --with-study includes them: the reproduction study (every
# recipe x 3 seeds from all-MiniLM-L6-v2) and the raw-encoder setting (pre-training, then 6 methods x 3 seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
python benchmarks/bench_train_st.py
python benchmarks/profile_step.py
python benchmarks/checkpoint_size.py
python benchmarks/bench_checkpoint_stall.py
python benchmarks/bench_scale.py
python benchmarks/bench_eval.py
python benchmarks/bench_augment.py
python benchmarks/bench_sda.py
python benchmarks/bench_sda_rates.py
python benchmarks/bench_una.py
python benchmarks/bench_collate.py
python benchmarks/bench_pretrain.py
if [ "${1:-}" = "--with-study" ]; then
  bash benchmarks/reproduction.sh
  bash benchmarks/raw_setting.sh
fi
