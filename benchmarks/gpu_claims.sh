#!/usr/bin/env bash
# One prepared run for a GPU machine lent for minutes: the real-data runs that cost CPU-hours, all
# at once on one GPU (each model a process of its own: the step loops are launch-bound, so several
# share a GPU at nearly their solo speed):
#   1. Figure 2 and reversal on Europarl it->en: `rnnsearch experiment length-curve reverse --jobs 6`
#      (RNNencdec-30/50, RNNsearch-30/50, RNNencdec/RNNsearch reversed), every model EP_MIN minutes,
#      scored on the whole test split (docs/experiments.md);
#   2. Hansards fr->en and en->fr for attention AER with symmetrisation and the shift, chosen on the
#      trial sentences (python -m benchmarks.hansards_aer --both-directions; no eflomal: no network there);
#   3. configs/multi30k_de_en.yaml, the full-size model, to early stopping or M30_MIN minutes
#      (benchmarks/gpu_multi30k.sh), scored on test_2016_flickr.
# Everything it reports (JSON, tables, figures, training logs; no weights) is packed into
# $OUT/claims.tar.gz, one file, as the device tool brings back at most 8.
#   DATA=.gpu/data OUT=out bash benchmarks/gpu_claims.sh       # DATA holds the corpora as `rnnsearch
#                                                                # data get` lays them out
# DEVICE=cpu TINY=1 rehearses the whole script on a CPU in a few minutes (tiny budgets and corpora).
set -uo pipefail
DATA=${DATA:-${RNNSEARCH_DATA:-data}}
OUT=${OUT:-runs/gpu-claims}
DEVICE=${DEVICE:-cuda}
WORK=${WORK:-/tmp/claims}
EP_MIN=${EP_MIN:-5}; HANS_MIN=${HANS_MIN:-5}; M30_MIN=${M30_MIN:-6}
EP_TRAIN=${EP_TRAIN:-0}; EP_TEST=${EP_TEST:-0}; HANS_PAIRS=${HANS_PAIRS:-310661}
SIZE=${SIZE:-256}
if [ "$DEVICE" = cuda ]; then
  FAST=(--set train.precision=bf16 --set model.gru=cudnn --set train.batch_by=tokens --set train.batch_size=6000)
else
  FAST=(--set train.threads=1)
fi
if [ "${TINY:-0}" = 1 ]; then  # a rehearsal: seconds per model, small samples
  EP_MIN=0.3; HANS_MIN=0.3; M30_MIN=0.3; EP_TRAIN=3000; EP_TEST=60; HANS_PAIRS=3000; SIZE=32
fi
mkdir -p "$OUT" "$WORK"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
R="$WORK/results"
mkdir -p "$R"
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi";
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"; } \
  | tee "$R/machine.txt"
start=$(date +%s)

europarl() {
  $PY -m rnnsearch experiment length-curve reverse --corpus europarl-it-en --data "$DATA" \
    --out "$WORK/europarl" --train-sentences "$EP_TRAIN" --test-sentences "$EP_TEST" \
    --budget-minutes "$EP_MIN" --jobs 6 --set train.device="$DEVICE" \
    --set model.emb="$SIZE" --set model.hidden="$SIZE" --set model.align="$SIZE" --set model.maxout="$SIZE" \
    "${FAST[@]}" > "$R/europarl.md" 2> "$R/europarl.log"
  echo "europarl exit $? after $(( $(date +%s) - start )) s" | tee -a "$R/times.txt"
}

hansards() {
  $PY -m benchmarks.hansards_aer --data "$DATA" --work "$WORK/hansards" --sentences "$HANS_PAIRS" \
    --minutes "$HANS_MIN" --both-directions --skip-eflomal --device "$DEVICE" --set train.device="$DEVICE" \
    "${FAST[@]}" > "$R/hansards_aer.json" 2> "$R/hansards.log"
  echo "hansards exit $? after $(( $(date +%s) - start )) s" | tee -a "$R/times.txt"
}

multi30k() {
  local flags=(--set train.device="$DEVICE")
  [ "$DEVICE" = cuda ] && flags+=(--set train.precision=bf16 --set model.gru=cudnn --set train.compile=true)
  [ "${TINY:-0}" = 1 ] && flags+=(--set model.emb=32 --set model.hidden=32 --set model.align=32 --set model.maxout=32)
  DATA="$DATA/multi30k" OUT="$R/multi30k" RUN="$WORK/m30" MINUTES="$M30_MIN" PYTHON=$PY \
    bash benchmarks/gpu_multi30k.sh "${flags[@]}" > "$R/multi30k.log" 2>&1
  echo "multi30k exit $? after $(( $(date +%s) - start )) s" | tee -a "$R/times.txt"
}

europarl & hansards & multi30k &
wait
# what comes back: results and logs, each model's config, training log and process output
for d in "$WORK"/europarl/models/*/; do
  m=$(basename "$d"); mkdir -p "$R/europarl_models/$m"
  cp "$d"/config.json "$d"/log.jsonl "$R/europarl_models/$m/" 2>/dev/null
done
cp "$WORK"/europarl/models/*.log "$R/europarl_models/" 2>/dev/null
for e in length-curve reverse; do mkdir -p "$R/$e"; cp "$WORK/europarl/$e"/* "$R/$e/" 2>/dev/null; done
for m in model model_en_fr; do
  mkdir -p "$R/hansards_$m"; cp "$WORK/hansards/$m"/{config.json,log.jsonl} "$R/hansards_$m/" 2>/dev/null
done
tar -czf "$OUT/claims.tar.gz" -C "$WORK" results
ls -la "$OUT"; cat "$R/times.txt"
