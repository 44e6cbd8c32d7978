#!/usr/bin/env bash
# One prepared device run (see DEVELOPERS.md) for the GPU half of the speed work: the --quick
# benchmark on the GPU in the variants below, one JSON file each, then (M30=1) the Multi30k
# wall time to the core BLEU with the fastest GPU settings through gpu_multi30k.sh.
#   DATA=path/to/multi30k OUT=results-dir bash benchmarks/gpu_speed.sh
#   VARIANTS="fp32 bf16-cudnn" SECONDS_EACH=20 M30=1 MINUTES=6 ...   (defaults below)
# A variant that fails is logged and the next one runs: every JSON that exists is a measurement.
# DEVICE=cpu rehearses the whole script on a CPU (its figures are then CPU figures).
set -uo pipefail
DATA=${DATA:-../shared/data/multi30k}
OUT=${OUT:-runs/gpu-speed}
SECONDS_EACH=${SECONDS_EACH:-20}
VARIANTS=${VARIANTS:-"fp32 bf16 bf16-cudnn bf16-cudnn-compile bf16-cudnn-compile-tok"}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi";
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"; } | tee "$OUT/machine.txt"

for v in $VARIANTS; do
  args=(--quick --device "$DEVICE" --corpus "$DATA" --train-seconds "$SECONDS_EACH" --decode-sentences 1000 --decode-batch 1000)
  case $v in
    fp32) ;;
    bf16) args+=(--precision bf16) ;;
    bf16-cudnn) args+=(--precision bf16 --gru cudnn) ;;
    bf16-cudnn-compile) args+=(--precision bf16 --gru cudnn --compile) ;;
    bf16-cudnn-compile-tok) args+=(--precision bf16 --gru cudnn --compile --batch-tokens 8192) ;;
    bf16-cudnn-tok) args+=(--precision bf16 --gru cudnn --batch-tokens 8192) ;;
    *) echo "unknown variant $v" | tee -a "$OUT/errors.txt"; continue ;;
  esac
  echo "== $v: ${args[*]}"
  start=$(date +%s)
  if timeout 240 $PY benchmarks/bench.py "${args[@]}" > "$OUT/quick-$v.json" 2> "$OUT/quick-$v.err"; then
    echo "$v ok in $(( $(date +%s) - start )) s"; cat "$OUT/quick-$v.json"
  else
    echo "$v FAILED (rc $?) after $(( $(date +%s) - start )) s" | tee -a "$OUT/errors.txt"; tail -5 "$OUT/quick-$v.err"
    rm -f "$OUT/quick-$v.json"
  fi
done

if [ "${M30:-0}" = 1 ]; then
  OUT="$OUT/multi30k" DATA="$DATA" MINUTES="${MINUTES:-6}" bash benchmarks/gpu_multi30k.sh --set train.device="$DEVICE" \
    --set train.precision=bf16 --set model.gru=cudnn --set train.compile=true
fi
