#!/usr/bin/env bash
# The GPU suite: everything that can only be measured or proven on a CUDA GPU, in one command
# (docs/scaling.md gives its time on an H100). Every figure goes to benchmarks/results/
# (gpu_tests, gpu_training, gpu_recipes, checkpoint_stall_cuda: JSON + Markdown naming the machine).
#
#   bash benchmarks/gpu_suite.sh [COPY_DIR]                 # all parts; results also copied to COPY_DIR
#   PARTS=tests,training bash benchmarks/gpu_suite.sh       # some parts (a short lease: split the suite)
#   PARTS=training bash benchmarks/gpu_suite.sh             # one device call of under 8 minutes
#
# Parts: tests     pytest -m cuda (every recipe, host syncs with the GPU's sync-debug mode, precision,
#                  the compiled unpadded layers against the padded forward)
#        training  bench_gpu.py: every cselab path (padded/unpadded x eager/compiled) vs sentence-transformers
#                  at 6x384 batch 64, 12x768 batch 64 and 12x768 batch 512; it starts nothing after
#                  TRAINING_SECONDS (default 420: the part ends within 7 minutes), writing what did not fit
#                  as "not measured: out of time"; TRAINING_ARGS are passed on (e.g. a second call for
#                  what the first left: TRAINING_ARGS="--shapes minilm-64 --name gpu_training_minilm")
#        recipes   every shipped recipe 20 steps with sync-debug mode on in steps, and 2 minutes of
#                  MLM pre-training of a 12x768 BERT stopped by SIGINT (checkpoint written)
#        stall     how long the loop is blocked per checkpoint, synchronous vs background writer
# Needs ../shared/data beside the repository (the Wiki sample, STS-B dev, the pre-training corpus).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
PARTS=${PARTS:-tests,training,recipes,stall}
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_suite.sh: no CUDA GPU is visible')" \
  || exit 2
failed=()
run() {  # run NAME COMMAND...: time it, keep going after a failure, remember it
  local name=$1; shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" || failed+=("$name")
  echo "== $name: $((SECONDS - start)) s"
}
case ",$PARTS," in *,tests,*) run tests python3 benchmarks/gpu_tests.py ;; esac
# shellcheck disable=SC2086  # TRAINING_ARGS: options, split on purpose
case ",$PARTS," in *,training,*) run training python3 benchmarks/bench_gpu.py --stsb minilm-64 \
  --deadline "${TRAINING_SECONDS:-420}" ${TRAINING_ARGS:-} ;; esac
case ",$PARTS," in *,recipes,*) run recipes python3 benchmarks/gpu_recipes.py --steps 20 --pretrain-seconds 120 ;; esac
case ",$PARTS," in *,stall,*) run stall python3 benchmarks/bench_checkpoint_stall.py --device cuda ;; esac
if [ -n "${1:-}" ]; then
  mkdir -p "$1"
  for file in benchmarks/results/{gpu_tests,gpu_training*,gpu_recipes,checkpoint_stall_cuda}.{json,md}; do
    cp "$file" "$1"/ 2>/dev/null || true
  done
fi
if [ ${#failed[@]} -gt 0 ]; then echo "gpu_suite: failed: ${failed[*]}"; exit 1; fi
echo "gpu_suite: all parts ran"
