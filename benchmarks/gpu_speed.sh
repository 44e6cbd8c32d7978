#!/usr/bin/env bash
# One prepared run for a GPU machine lent for minutes: the speed figures that need a GPU.
#   1. the device-aware tests on the GPU (RNNSEARCH_TEST_DEVICE=cuda pytest -k device: the cuDNN
#      encoder, the inductor-compiled time step, beam search, CUDA-graph decoding, autocast training);
#   2. the quick benchmark (python -m benchmarks.bench --quick) in the variants below, one JSON
#      each, with a profile of 10 steps, each decoding twice: eagerly and with every step replayed
#      from a CUDA graph (--cuda-graphs);
#   3. picks the training flags the variants measured fastest (m30-flags.txt: bf16 if it beat fp32,
#      the cuDNN encoder if it beat the loop, the compiled step if it beat eager) and, with M30=1,
#      trains Multi30k with them through gpu_multi30k.sh (wall time to the core BLEU).
#   DATA=path/to/multi30k OUT=results-dir bash benchmarks/gpu_speed.sh
#   VARIANTS="fp32 bf16-cudnn" SECONDS_EACH=10 CHECK=0 M30=1 MINUTES=6 ...   (defaults below)
#   M30=1 VARIANTS= CHECK=0 FLAGS_FROM=earlier-results-dir ...   (step 3 alone, flags from an earlier run)
# A variant that fails is logged and the next one runs: every JSON that exists is a measurement.
# DEVICE=cpu rehearses the whole script on a CPU (its figures are then CPU figures).
set -uo pipefail
DATA=${DATA:-${RNNSEARCH_DATA:-data}/multi30k}
OUT=${OUT:-runs/gpu-speed}
SECONDS_EACH=${SECONDS_EACH:-10}
VARIANTS=${VARIANTS-"fp32 bf16 bf16-cudnn bf16-cudnn-tok bf16-cudnn-compile-tok bf16-cudnn-tok32k bf16-cudnn-compile-tok32k"}
DEVICE=${DEVICE:-cuda}
FLAGS_FROM=${FLAGS_FROM:-$OUT}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>/dev/null || echo "no nvidia-smi";
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(),
'cudnn', torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)"; } | tee "$OUT/machine.txt"

if [ "${CHECK:-1}" = 1 ]; then
  echo "== tests on $DEVICE"
  # one process (-o addopts=-q): the GPU machine has no pytest-xdist, and its tests share one device
  RNNSEARCH_TEST_DEVICE=$DEVICE timeout 240 $PY -m pytest -o addopts=-q -p no:cacheprovider -k device -rs \
    tests/test_model.py tests/test_search.py tests/test_graphs.py tests/test_train.py 2>&1 | tee "$OUT/tests.txt" | tail -15
fi

# A variant's name says its options: (fp32|bf16)[-cudnn][-compile][-tok|-tok32k] (8,192 or 32,768 tokens a batch).
for v in $VARIANTS; do
  if ! [[ $v =~ ^(fp32|bf16)(-cudnn)?(-compile)?(-tok|-tok32k)?$ ]]; then
    echo "unknown variant $v" | tee -a "$OUT/errors.txt"; continue
  fi
  args=(--quick --device "$DEVICE" --corpus "$DATA" --train-seconds "$SECONDS_EACH" --decode-sentences 1000
        --decode-batch 1000 --profile "$OUT/profile-$v.txt" --precision "${BASH_REMATCH[1]}" --cuda-graphs)
  [ -n "${BASH_REMATCH[2]}" ] && args+=(--gru cudnn)
  [ -n "${BASH_REMATCH[3]}" ] && args+=(--compile)
  case ${BASH_REMATCH[4]} in -tok32k) args+=(--batch-tokens 32768) ;; -tok) args+=(--batch-tokens 8192) ;; esac
  echo "== $v: ${args[*]}"
  start=$(date +%s)
  if timeout 200 $PY -m benchmarks.bench "${args[@]}" > "$OUT/quick-$v.json" 2> "$OUT/quick-$v.err"; then
    echo "$v ok in $(( $(date +%s) - start )) s"
    $PY -c "import json,sys; r=json.load(open(sys.argv[1])); print({k: r.get(k) for k in ('train_tgt_tok_per_s','mfu','gemm_gflops','greedy_sent_per_s','beam5_seconds','peak_gpu_mb')}, r.get('profile'), r.get('cuda_graphs'))" "$OUT/quick-$v.json"
  else
    echo "$v FAILED (rc $?) after $(( $(date +%s) - start )) s" | tee -a "$OUT/errors.txt"; tail -5 "$OUT/quick-$v.err"
    rm -f "$OUT/quick-$v.json"
  fi
done

# Each option of the Multi30k run is kept only where its pair of variants measured it faster.
$PY - "$FLAGS_FROM" "$DEVICE" > "$OUT/m30-flags.txt" <<'EOF'
import json, sys
from pathlib import Path

runs, device = Path(sys.argv[1]), sys.argv[2]
def speed(v):
    f = runs / f"quick-{v}.json"
    return json.loads(f.read_text())["train_tgt_tok_per_s"] if f.exists() else None
def faster(a, b):
    return speed(a) is not None and speed(b) is not None and speed(b) > speed(a)
flags = [f"train.device={device}"]
if faster("fp32", "bf16"):
    flags.append("train.precision=bf16")
if faster("bf16", "bf16-cudnn") and "train.precision=bf16" in flags:
    flags.append("model.gru=cudnn")
if faster("bf16-cudnn-tok", "bf16-cudnn-compile-tok") and "model.gru=cudnn" in flags:
    flags.append("train.compile=true")
print(" ".join(f"--set {f}" for f in flags))
EOF
echo "Multi30k flags: $(cat "$OUT/m30-flags.txt")"

if [ "${M30:-0}" = 1 ]; then
  # shellcheck disable=SC2046
  OUT="$OUT/multi30k" DATA="$DATA" MINUTES="${MINUTES:-6}" bash benchmarks/gpu_multi30k.sh $(cat "$OUT/m30-flags.txt")
fi
