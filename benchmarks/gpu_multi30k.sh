#!/usr/bin/env bash
# One prepared run for a GPU machine lent for minutes: train configs/multi30k_de_en.yaml on the
# GPU under a wall-clock cap, then score test_2016_flickr (beam 5 and greedy) with sacrebleu.
#   DATA=path/to/multi30k OUT=results-dir MINUTES=6 bash benchmarks/gpu_multi30k.sh [--set k=v ...]
set -euo pipefail
DATA=${DATA:-${RNNSEARCH_DATA:-data}/multi30k}
OUT=${OUT:-runs/gpu-out}
MINUTES=${MINUTES:-6}
RUN=${RUN:-/tmp/m30-gpu}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi";
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"; } | tee "$OUT/machine.txt"
rm -rf "$RUN"
start=$(date +%s)
$PY -m rnnsearch train configs/multi30k_de_en.yaml --model-dir "$RUN" \
  --set data.train_src="$DATA/train.de.gz" --set data.train_tgt="$DATA/train.en.gz" \
  --set data.valid_src="$DATA/val.de.gz" --set data.valid_tgt="$DATA/val.en.gz" \
  --set train.max_minutes="$MINUTES" --set train.progress=false --set train.log_every=50 "$@" 2>&1 | tee "$OUT/train.txt"
echo "train_wall_seconds $(( $(date +%s) - start ))" | tee -a "$OUT/train.txt"
cp "$RUN/log.jsonl" "$RUN/config.json" "$OUT/"
for beam in 5 1; do
  $PY -m rnnsearch evaluate --model "$RUN" --src "$DATA/test_2016_flickr.de.gz" --ref "$DATA/test_2016_flickr.en.gz" \
    --beam $beam --output "$OUT/test_2016_flickr.beam$beam.en" | tee "$OUT/test_beam$beam.json"
done
