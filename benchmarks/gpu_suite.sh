#!/usr/bin/env bash
# The GPU suite: everything that can only be measured or proven on a CUDA GPU, in one command
# (docs/scaling.md gives its time on an H100). Every figure goes to benchmarks/results/
# (gpu_tests, gpu_training, gpu_recipes, checkpoint_stall_cuda: JSON + Markdown naming the machine).
#
#   bash benchmarks/gpu_suite.sh [COPY_DIR]                 # all parts; results also copied to COPY_DIR
#   PARTS=tests,training bash benchmarks/gpu_suite.sh       # some parts (a short lease: split the suite)
#
# Parts: tests     pytest -m cuda (every recipe, host syncs with the GPU's sync-debug mode, precision)
#        training  bench_gpu.py: cselab vs sentence-transformers, 6x384 at batch 64 and 12x768 at batch 512
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
case ",$PARTS," in *,training,*) run training python3 benchmarks/bench_gpu.py --steps 100 --compile bert-base ;; esac
case ",$PARTS," in *,recipes,*) run recipes python3 benchmarks/gpu_recipes.py --steps 20 --pretrain-seconds 120 ;; esac
case ",$PARTS," in *,stall,*) run stall python3 benchmarks/bench_checkpoint_stall.py --device cuda ;; esac
if [ -n "${1:-}" ]; then
  mkdir -p "$1"
  for name in gpu_tests gpu_training gpu_recipes checkpoint_stall_cuda; do
    cp benchmarks/results/"$name".json benchmarks/results/"$name".md "$1"/ 2>/dev/null || true
  done
fi
if [ ${#failed[@]} -gt 0 ]; then echo "gpu_suite: failed: ${failed[*]}"; exit 1; fi
echo "gpu_suite: all parts ran"
