#!/usr/bin/env bash
# What a source tree trains and translates, to compare two trees byte for byte:
#   RNNSEARCH_DATA=DIR bash benchmarks/identity.sh SRC OUT      (SRC: a tree's src/, OUT: a new folder)
# Trains tiny Multi30k models (plain with dropout, validation and snapshots; agreement; guided from
# a links file, with shift 1; guided with an alignment head), fp32, one thread, then translates
# (beam 5, greedy, n-best, links, int8, shortlist, saliency) and aligns with each. OUT/out/ holds
# every output and the logs without their wall-clock fields, OUT/weights.sha256 every weight file
# (train_state's tensors, its metadata holding wall-clock seconds). Compare two runs with
# `diff <(cd A && sha256sum out/*) <(cd B && sha256sum out/*)` and `diff A/weights.sha256 B/...`.
# HEAD_SET and LINKS_SAL: the flags of an alignment head and of saliency links, for trees that
# spell them otherwise (older ones: "--set model.alignment_head=true --set
# model.alignment_head_future=true --set model.alignment_head_refine=true" and "--saliency").
set -eu
SRC=$(cd "$1" && pwd); OUT=$2; PY=${PYTHON:-python}
HEAD_SET=${HEAD_SET:-"--set model.alignment_head=future+refine"}
LINKS_SAL=${LINKS_SAL:-"--links saliency"}
if [ -e "$OUT" ]; then echo "identity.sh: $OUT exists: name a new folder" >&2; exit 2; fi
mkdir -p "$OUT/data"; cd "$OUT"
M=${RNNSEARCH_DATA:?set RNNSEARCH_DATA to a folder holding multi30k/}/multi30k
zcat $M/train.de.gz | head -3000 > data/train.de; zcat $M/train.en.gz | head -3000 > data/train.en
zcat $M/val.de.gz | head -200 > data/val.de; zcat $M/val.en.gz | head -200 > data/val.en
zcat $M/test_2016_flickr.de.gz | head -300 > data/test.de; zcat $M/test_2016_flickr.en.gz | head -300 > data/test.en
paste -d '\t' data/train.de data/train.en | awk -F'\t' '{n=split($1,a," "); m=split($2,b," "); k=(n<m?n:m); l=""; for(i=0;i<k;i++) l=l (i?" ":"") i "-" i; print l}' > data/train.links
cat > base.yaml <<YAML
model_dir: m/plain
data: {train_src: data/train.de, train_tgt: data/train.en, valid_src: data/val.de, valid_tgt: data/val.en, max_len: 50}
vocab: {kind: bpe, size: 1000, joint: false}
model: {emb: 48, hidden: 48, align: 48, maxout: 48, dropout_hidden: 0.2, word_dropout: 0.1}
train: {optimizer: adam, lr: 0.003, batch_size: 32, max_steps: 200, valid_every: 100, valid_beam: 1, threads: 1, precision: fp32, seed: 3, progress: false, keep_last: 2}
decode: {beam: 5, precision: fp32}
YAML
export OMP_NUM_THREADS=1 PYTHONPATH=$SRC RNNSEARCH_CACHE=$OUT/cache
R() { $PY -m rnnsearch "$@"; }
R train base.yaml 2> log.plain
R train base.yaml --model-dir m/agree --set train.agreement=1.0 --set train.max_steps=60 2> log.agree
R train base.yaml --model-dir m/head --set train.guided_alignment=data/train.links $HEAD_SET --set train.max_steps=120 2> log.head
R train base.yaml --model-dir m/guided --set train.guided_alignment=data/train.links --set train.guided_alignment_shift=1 --set train.max_steps=80 2> log.guided
mkdir -p out
for m in plain agree head guided; do
  R translate --model m/$m --input data/test.de --output out/$m.b5
  R translate --model m/$m --input data/test.de --beam 1 --output out/$m.b1
  R translate --model m/$m --input data/test.de --n-best 3 --output out/$m.nbest
  R translate --model m/$m --input data/test.de --alignment --output out/$m.align
  R translate --model m/$m --input data/test.de --quantize int8 --output out/$m.int8
  R align --model m/$m --src data/test.de --tgt data/test.en --out out/$m.links > out/$m.align.json
done
head -60 data/test.de > data/test60.de
R translate --model m/guided --input data/test.de --alignment --alignment-shift 1 --output out/guided.align.shift1
R align --model m/guided --src data/test.de --tgt data/test.en --shift 1 > out/guided.links.shift1
R translate --model m/plain --input data/test60.de --alignment $LINKS_SAL --output out/plain.saliency
R translate --model m/head --input data/test60.de --alignment --output out/head.headlinks
R shortlist build --model m/plain 2> log.shortlist
R translate --model m/plain --input data/test.de --shortlist auto --output out/plain.shortlist
find m -name '*.safetensors' ! -name 'train_state.safetensors' | sort | xargs sha256sum > weights.sha256
for f in $(find m -name 'train_state.safetensors' | sort); do
  $PY - "$f" >> weights.sha256 <<'PY'
import hashlib, sys
from safetensors import safe_open
with safe_open(sys.argv[1], "pt") as f:
    meta = {k: v for k, v in (f.metadata() or {}).items()}
    h = hashlib.sha256()
    for k in sorted(f.keys()):
        h.update(k.encode()); h.update(f.get_tensor(k).numpy().tobytes())
print(h.hexdigest(), sys.argv[1], "(tensors; metadata keys:", sorted(meta), ")")
PY
done
for m in plain agree head guided; do
  $PY - "m/$m/log.jsonl" > out/$m.log <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: v for k, v in r.items() if k not in ("time", "elapsed", "tok_s", "tok_per_s", "tokens_per_second", "wall", "seconds", "minutes")}, sort_keys=True))
PY
done
echo done
