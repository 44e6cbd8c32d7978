"""Alignment error rate of RNNsearch attention on the Hansards NAACL-2003 gold alignments,
next to a statistical aligner (eflomal) on the same sentences.

    python -m benchmarks.hansards_aer --data DIR --work runs/hansards [--minutes 45 | --steps N]
        [--both-directions | --agreement 1.0] [--threads 1] [--set train.device=cuda ...]
        [--weights attention saliency attention+saliency snapshot-mean averaged] [--ensemble WORK ...]

1. Normalise the Hansards training text (hansards_csc401_en_fr: raw, cased, accents stripped)
   the way the gold sentences were prepared (lower-cased, EGYPT-style tokens, French
   contractions expanded: "l'" -> "le", "du" -> "de le", ...), and strip accents from the gold text.
2. Train a French→English RNNsearch (configs/hansards_fr_en.yaml) on it, unless the run exists
   (an interrupted run is resumed); with --both-directions an English→French one beside it, the
   two at once in processes of their own; with --agreement λ instead the two directions trained
   jointly, their attention pulled together (train.agreement, engine/train/agreement.py), in one
   process: model_agree-KIND-λ/ and model_agree-KIND-λ/reverse/.
3. Align the 37 trial sentences with attention — argmax or thresholded many-to-many, α_i or the
   shifted α_{i+1} for target word i, and with two directions their intersection, union,
   grow-diag-final-and, or their attention combined before links are made ("soft") — pick the
   setting on trial, and report AER/precision/recall of every setting on the 447 test sentences,
   the trial-chosen one marked. `--weights` adds other weights to make the links from, each
   scored the same way: gradient × input saliency, the mean of the attention (or head) and the
   saliency, the attention averaged over the run's kept snapshots (train.keep_last), and the
   attention of those snapshots' averaged weights. `--ensemble WORK ...` averages each kind with
   the same kind from the models of other work directories (trained the same way, another seed).
4. eflomal (PyPI), installed into its own virtualenv by this script, aligns the same training
   text plus the test sentences; its forward, reverse and symmetrised (grow-diag-final-and)
   alignments are scored the same way.

Prints one JSON object with every figure and the command-line needed to reproduce it.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import random
import re
import subprocess
import sys
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from benchmarks.common import ROOT, cpu_features, cpu_name, print_result
from rnnsearch.engine.align.links import aer, read_naacl, symmetrize
from rnnsearch.engine.train.agreement import KINDS

ELISIONS = {"c": "ce", "d": "de", "j": "je", "l": "le", "m": "me", "n": "ne", "s": "se", "t": "te",
            "qu": "que", "jusqu": "jusque", "lorsqu": "lorsque", "puisqu": "puisque", "quoiqu": "quoique"}
CONTRACTIONS = {"du": "de le", "au": "a le", "aux": "a les", "des": "de les"}
ABBREVIATIONS = {"mr.", "mrs.", "ms.", "hon.", "st.", "m.", "dr.", "mme.", "no."}


def strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def tokenize(text: str, french: bool) -> str:
    """Lower-cased, accent-free, punctuation split off, French elisions/contractions expanded."""
    text = strip_accents(text.lower())
    text = re.sub(r"([(),;:!?\"«»$%])", r" \1 ", text)
    text = re.sub(r"(\w)-(\w)", r"\1 - \2", text)
    text = re.sub(r"(\w)-(\w)", r"\1 - \2", text)
    out = []
    for word in text.split():
        if word.endswith(".") and word not in ABBREVIATIONS and not re.fullmatch(r"[\d.,]+", word):
            word, tail = word[:-1], ["."]
        else:
            tail = []
        if french and word == "aujourd'hui":
            out += ["aujourd'", "hui"]  # as the gold text splits it
        elif french:
            m = re.fullmatch(r"(c|d|j|l|m|n|s|t|qu|jusqu|lorsqu|puisqu|quoiqu)'(.+)", word)
            if m:
                out += [ELISIONS[m.group(1)], m.group(2)]
            elif word in CONTRACTIONS:
                out += CONTRACTIONS[word].split()
            elif word:
                out.append(word)
        else:
            m = re.fullmatch(r"(.+)('s|n't|'re|'ve|'ll|'m|'d)", word)
            out += [m.group(1), m.group(2)] if m else ([word] if word else [])
        out += tail
    return " ".join(out)


def prepare(data: Path, work: Path, n_train: int, seed: int) -> dict:
    prep = work / "data"
    done = prep / "DONE"
    paths = {k: str(prep / k) for k in ("train.fr", "train.en", "trial.fr", "trial.en", "test.fr", "test.en")}
    if done.exists():
        return paths
    prep.mkdir(parents=True, exist_ok=True)
    src = data / "hansards_csc401_en_fr"
    with gzip.open(src / "train.fr.gz", "rt", encoding="utf-8") as f:
        fr = f.read().splitlines()
    with gzip.open(src / "train.en.gz", "rt", encoding="utf-8") as f:
        en = f.read().splitlines()
    order = list(range(len(fr)))
    random.Random(seed).shuffle(order)
    order = sorted(order[:n_train])
    (prep / "train.fr").write_text("\n".join(tokenize(fr[i], True) for i in order) + "\n", encoding="utf-8")
    (prep / "train.en").write_text("\n".join(tokenize(en[i], False) for i in order) + "\n", encoding="utf-8")
    gold = data / "hansards_naacl2003_align_gold"
    for split in ("trial", "test"):
        for lang in ("fr", "en"):
            lines = (gold / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            # gold text is already tokenised; only case and accents differ from the training text
            (prep / f"{split}.{lang}").write_text(
                "\n".join(strip_accents(x.lower()).strip() for x in lines) + "\n", encoding="utf-8")
    done.write_text("ok\n")
    return paths


def bleu_sample(data: Path, work: Path, n: int, seed: int) -> dict:
    """A seeded sample of n pairs of the Hansards test split (hansards_csc401_en_fr test.*.gz: the
    2nd session, apart from the training text), normalised like the training text: the BLEU set."""
    prep = work / "data"
    paths = {lang: prep / f"bleu{n}.{lang}" for lang in ("fr", "en")}
    if all(p.exists() for p in paths.values()):
        return {k: str(v) for k, v in paths.items()}
    src = data / "hansards_csc401_en_fr"
    sides = {}
    for lang in ("fr", "en"):
        with gzip.open(src / f"test.{lang}.gz", "rt", encoding="utf-8") as f:
            sides[lang] = f.read().splitlines()
    order = sorted(random.Random(seed).sample(range(len(sides["fr"])), n))
    prep.mkdir(parents=True, exist_ok=True)
    for lang in ("fr", "en"):
        text = "\n".join(tokenize(sides[lang][i], lang == "fr") for i in order) + "\n"
        tmp = paths[lang].with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(paths[lang])
    return {k: str(v) for k, v in paths.items()}


def model_bleu(model: Path, src: str, ref: str, device: str = "cpu", beam: int = 5,
               weights: str = "best") -> dict:
    """BLEU (sacrebleu, default 13a tokenisation, on the normalised lower-cased text) of the model's
    best weights (or with weights="last" its last, last.safetensors) on src against ref, beam search."""
    import sacrebleu

    from rnnsearch.engine.checkpoint import load_weights
    from rnnsearch.engine.decode.loading import load

    sources = Path(src).read_text(encoding="utf-8").splitlines()
    refs = Path(ref).read_text(encoding="utf-8").splitlines()
    start = time.time()
    translator = load(model, device=device)
    if weights == "last":
        load_weights(model / "last.safetensors", translator.model)
    hyps = [t.text for t in translator.translate(sources, beam=beam, attention=False)]
    return {"bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2), "sentences": len(sources),
            "beam": beam, "weights": weights, "seconds": round(time.time() - start, 1)}


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def tagged_sources(sources: list[str], sure: list[set], seed: int) -> list[str]:
    """The tagged test set: each French sentence with one <b>...</b> around a seeded random run of
    1-3 words that all have a sure gold link (a sentence with no such run is left untagged)."""
    import html

    rng = random.Random(seed)
    out = []
    for line, links in zip(sources, sure):
        words = [html.escape(w, quote=False) for w in line.split()]
        linked = {i for i, _ in links}
        runs = [(a, b) for a in range(len(words)) for b in range(a + 1, min(a + 3, len(words)) + 1)
                if all(k in linked for k in range(a, b))]
        if runs:
            a, b = rng.choice(runs)
            words[a] = "<b>" + words[a]
            words[b - 1] += "</b>"
        out.append(" ".join(words))
    return out


def tag_placement(sources: list[str], sure: list[set], references: list[str], links: list[set],
                  seed: int = 1) -> dict:
    """Share of the tagged test set's tags that `links` put on the very reference words the sure
    gold links put them on (tag_accuracy)."""
    return tag_accuracy(tagged_sources(sources, sure, seed), sure, references, links)


def tag_accuracy(sources: list[str], gold: list[set], references: list[str], predicted: list[set]) -> dict:
    """Share of tags placed exactly where the gold links would place them, over a corpus.

    `sources` are lines of markup, `references` their plain translations, `gold` and `predicted`
    word links (source, target) between the two. A tag counts when its span of reference words
    from `predicted` equals the span from `gold` (engine/decode/markup.py's `placed_spans`, as
    `transfer` writes them), points included.
    """
    from rnnsearch.engine.decode.markup import parse, placed_spans

    exact = total = 0
    for markup, g, reference, p in zip(sources, gold, references, predicted, strict=True):
        marked, n = parse(markup), len(reference.split())
        want, got = placed_spans(marked, n, g), placed_spans(marked, n, p)
        total += len(want)
        exact += sum(a == b for a, b in zip(want, got))
    return {"accuracy": exact / total if total else math.nan, "tags": total, "exact": exact}


WEIGHTS = ("attention", "saliency", "attention+saliency", "snapshot-mean", "averaged")


def pair_weights(models: dict, kinds: tuple[str, ...], fr: list[str], en: list[str], fr_path: str,
                 en_path: str, last: int = 0) -> dict[str, dict[str, list]]:
    """{kind: {"fwd": rows, "rev": rows}}: the word-level weights on a split's pairs of each side's
    models (several: an ensemble, their weights averaged cell by cell), for each kind: "attention"
    (the head where the model has one), "saliency" (gradient × input), "attention+saliency" (the
    mean of those two, cell by cell: two opinions on each row), "snapshot-mean" (the attention
    averaged over the model's kept snapshots, train.keep_last), "averaged" (the attention of the
    snapshots' averaged weights); `last`: the last N snapshots only (0: all kept)."""
    from rnnsearch.engine.align.links import mean_weights

    sides = {"fwd": (fr, en, fr_path), "rev": (en, fr, en_path)}
    out: dict[str, dict[str, list]] = {kind: {} for kind in kinds}
    for side, translators in models.items():
        each = [_model_weights(t, kinds, *sides[side], last) for t in translators]
        for kind in kinds:
            out[kind][side] = mean_weights([w[kind] for w in each])
    return out


def _model_weights(translator, kinds: tuple[str, ...], src: list[str], tgt: list[str], where: str,
                   last: int) -> dict[str, list]:
    """{kind: rows} of one model (pair_weights)."""
    from rnnsearch.engine.align.links import mean_weights, word_attention
    from rnnsearch.engine.checkpoint import average_weights, load_weights, snapshots

    rows: dict[str, list] = {}  # attention and saliency, each computed once
    out: dict[str, list] = {}
    for kind in kinds:
        if kind in ("attention", "saliency", "attention+saliency"):
            for part in kind.split("+"):
                if part not in rows:
                    rows[part] = word_attention(translator, src, tgt, where,
                                                links="saliency" if part == "saliency" else None)
            # the mean of the two: what word_attention(links="mean") gives (the merge to words is
            # linear), from rows already computed rather than a second pass of saliency
            both = kind not in rows
            out[kind] = mean_weights([rows["attention"], rows["saliency"]]) if both else rows[kind]
            continue
        snaps = snapshots(translator.model_dir)[-last:] if last else snapshots(translator.model_dir)
        if not snaps:
            raise SystemExit(f"{translator.model_dir}: no snapshots for {kind} (train.keep_last)")
        kept = {k: v.clone() for k, v in translator.model.state_dict().items()}
        if kind == "averaged":
            translator.model.load_state_dict(average_weights(snaps))
            out[kind] = word_attention(translator, src, tgt, where)
        else:
            runs = []
            for snap in snaps:
                load_weights(snap, translator.model)
                runs.append(word_attention(translator, src, tgt, where))
            out[kind] = mean_weights(runs)
        translator.model.load_state_dict(kept)
    return out


def score_settings(weights: dict[str, dict[str, list]], sure: list, possible: list, split: str) -> dict:
    """{label: (AER scores, links)} for every kind of weights, method, threshold, row shift and
    (with a reverse model) symmetrisation. Labels: split/[kind:]method[@thr]/shiftN[/sym], the
    kind left out for the attention."""
    from rnnsearch.engine.align.links import attention_links, flip, soft_links

    methods = [("argmax", 0.0), *(("threshold", t) for t in (0.1, 0.2, 0.3, 0.4))]
    out = {}
    for kind, att in weights.items():
        # None: the forward model alone; "reverse": the en->fr model alone, its links flipped
        # "soft": both directions' weights combined before links are made (alignment.soft_links)
        symmetrise = [None] + (["reverse", "intersection", "union", "grow-diag-final-and", "soft"]
                               if "rev" in att else [])
        for (method, thr), shift in itertools.product(methods, (0, 1)):
            label = (f"{split}/" + ("" if kind == "attention" else f"{kind}:") + method
                     + (f"@{thr}" if method == "threshold" else "") + f"/shift{shift}")
            fwd = [attention_links(w, method, thr, shift) for w in att["fwd"]]
            back = [flip(attention_links(w, method, thr, shift)) for w in att.get("rev", [])]
            for sym in symmetrise:
                if sym is None or sym == "reverse":
                    links = fwd if sym is None else back
                elif sym == "soft":
                    links = [soft_links(f, b, method, thr, shift) for f, b in zip(att["fwd"], att["rev"])]
                else:
                    links = [symmetrize(f, b, sym) for f, b in zip(fwd, back)]
                out[label + (f"/{sym}" if sym else "")] = ({**aer(links, sure, possible),
                                                            "sentences": len(links)}, links)
    return out


def attention_aer(model: Path, paths: dict, data: Path, reverse: Path | None = None,
                  device: str = "cpu", kinds: tuple[str, ...] = ("attention",), last: int = 0,
                  ensemble: tuple[Path, ...] = ()) -> dict:
    """AER of attention alignments on trial and test, for every kind of weights (WEIGHTS),
    method, threshold, row shift and (with a reverse model) symmetrisation; the setting with the
    lowest trial AER is the one reported for test. Each model's weights on a split are computed
    once (teacher forcing), the settings are applied to them. `ensemble`: other work directories
    of this script whose models join these (model/, and model_en_fr/ with a reverse model), their
    weights averaged with these."""
    from rnnsearch.engine.align.links import attention_links, word_attention
    from rnnsearch.engine.decode.loading import load

    gold = data / "hansards_naacl2003_align_gold"
    models = {"fwd": [load(d, device=device) for d in (model, *(w / model.name for w in ensemble))]}
    if reverse is not None:
        models["rev"] = [load(d, device=device) for d in (reverse, *(w / reverse.name for w in ensemble))]
    out: dict = {}
    kept: dict[str, list] = {}  # the test links of every setting, for the tag placement
    for split in ("trial", "test"):
        fr = Path(paths[f"{split}.fr"]).read_text(encoding="utf-8").splitlines()
        en = Path(paths[f"{split}.en"]).read_text(encoding="utf-8").splitlines()
        sure, possible = read_naacl(gold / f"{split}.wa.nonullalign", len(fr))
        weights = pair_weights(models, kinds, fr, en, paths[f"{split}.fr"], paths[f"{split}.en"], last)
        for label, (scores, links) in score_settings(weights, sure, possible, split).items():
            out[label] = scores
            if split == "test":
                kept[label] = links
    if models["fwd"][0].model.align_head is not None:  # links came from the head: the attention beside
        # (fr, en, sure, possible: the test split's, the loop's last)
        rows = word_attention(models["fwd"][0], fr, en, paths["test.fr"], links="attention")
        out["attention_not_head/test/argmax/shift0"] = aer([attention_links(w) for w in rows], sure, possible)
    best = min((k for k in out if k.startswith("trial/")), key=lambda k: out[k]["aer"])
    out["chosen_on_trial"] = best.split("/", 1)[1]
    out["test_with_trial_choice"] = out["test/" + out["chosen_on_trial"]]
    fr, en = (Path(paths[f"test.{lang}"]).read_text(encoding="utf-8").splitlines() for lang in ("fr", "en"))
    sure = read_naacl(gold / "test.wa.nonullalign", len(fr))[0]
    first = "" if kinds[0] == "attention" else f"{kinds[0]}:"  # the first kind's plain argmax, and the choice
    out["tags"] = {setting: tag_placement(fr, sure, en, kept["test/" + setting])
                   for setting in (f"{first}argmax/shift0", out["chosen_on_trial"])}
    return out


def train_model(model: Path, paths: dict, src: str, tgt: str, args, env: dict) -> None:
    """Train (or resume) the RNNsearch of one direction, src -> tgt ("fr"/"en") — with --agreement
    jointly with the other direction; finished runs are left alone. With --steps the budget is
    total steps over every resume, else --minutes a call."""
    base = [sys.executable, "-m", "rnnsearch", "train"]
    limit = f"train.max_steps={args.steps}" if args.steps else f"train.max_minutes={args.minutes}"
    overrides = ["--set", limit, "--set", "train.progress=false", "--set", f"train.threads={args.threads}"]
    if args.agreement:
        overrides += ["--set", f"train.agreement={args.agreement}", "--set",
                      f"train.agreement_loss={args.agreement_loss}"]
    for extra in args.set or []:
        overrides += ["--set", extra]
    if (model / "DONE").exists():
        done_at = json.loads((model / "DONE").read_text())["step"]
        if not args.steps or done_at >= args.steps:
            return
    if (model / "train_state.safetensors").exists():
        subprocess.run(base + ["--resume", str(model)] + overrides, check=True, env=env)
        return
    subprocess.run(base + [str(ROOT / "configs" / "hansards_fr_en.yaml"), "--model-dir", str(model),
                           "--set", f"data.train_src={paths[f'train.{src}']}",
                           "--set", f"data.train_tgt={paths[f'train.{tgt}']}",
                           "--set", f"data.valid_src={paths[f'trial.{src}']}",
                           "--set", f"data.valid_tgt={paths[f'trial.{tgt}']}"]
                   + overrides, check=True, env=env)


def eflomal_aer(work: Path, paths: dict, data: Path) -> dict:
    """eflomal on training text + test sentences (unsupervised), scored on the test part."""
    venv = work / "eflomal-venv"
    py = venv / "bin" / "python"
    if not py.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(py), "-m", "pip", "install", "-q", "eflomal"])
    train_fr = Path(paths["train.fr"]).read_text(encoding="utf-8").splitlines()
    train_en = Path(paths["train.en"]).read_text(encoding="utf-8").splitlines()
    test_fr = Path(paths["test.fr"]).read_text(encoding="utf-8").splitlines()
    test_en = Path(paths["test.en"]).read_text(encoding="utf-8").splitlines()
    joint = work / "eflomal"
    joint.mkdir(exist_ok=True)
    (joint / "src").write_text("\n".join(train_fr + test_fr) + "\n", encoding="utf-8")
    (joint / "tgt").write_text("\n".join(train_en + test_en) + "\n", encoding="utf-8")
    start = time.time()
    code = ("import eflomal, sys\n"
            "a = eflomal.Aligner()\n"
            "with open(sys.argv[1], encoding='utf-8') as s, open(sys.argv[2], encoding='utf-8') as t:\n"
            "    a.align(s, t, links_filename_fwd=sys.argv[3], links_filename_rev=sys.argv[4], quiet=True)\n")
    run([str(py), "-c", code, str(joint / "src"), str(joint / "tgt"), str(joint / "fwd"), str(joint / "rev")])
    seconds = time.time() - start
    n = len(test_fr)
    sure, possible = read_naacl(data / "hansards_naacl2003_align_gold" / "test.wa.nonullalign", n)

    def links(path: Path) -> list[set]:
        rows = path.read_text(encoding="utf-8").splitlines()[-n:]
        return [{tuple(int(x) for x in item.split("-")) for item in row.split()} for row in rows]

    fwd, rev = links(joint / "fwd"), links(joint / "rev")
    fr_test, en_test = test_fr[-n:], test_en[-n:]
    gdfa = [symmetrize(f, r) for f, r in zip(fwd, rev)]
    out = {"seconds": round(seconds, 1), "forward": aer(fwd, sure, possible),
           "reverse": aer(rev, sure, possible),
           "intersection": aer([f & r for f, r in zip(fwd, rev)], sure, possible),
           "grow_diag_final_and": aer(gdfa, sure, possible),
           "tags_grow_diag_final_and": tag_placement(fr_test, sure, en_test, gdfa)}
    return out


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("RNNSEARCH_DATA") or "data",
                    help="folder holding hansards_csc401_en_fr/ and hansards_naacl2003_align_gold/ "
                         "(default $RNNSEARCH_DATA, else ./data)")
    ap.add_argument("--work", default="runs/hansards")
    ap.add_argument("--sentences", type=int, default=310661, help="training pairs (subsample)")
    ap.add_argument("--minutes", type=float, default=45.0, help="training wall-clock budget of this call")
    ap.add_argument("--steps", type=int, default=0,
                    help="training steps per model, in total over calls (resumable; 0: --minutes a call)")
    ap.add_argument("--both-directions", action="store_true",
                    help="also train English->French (model_en_fr) and score the symmetrised alignments")
    ap.add_argument("--agreement", type=float, default=0.0, metavar="λ",
                    help="train French->English and English->French jointly with this weight on their "
                         "attention's disagreement (train.agreement) and score the pair")
    ap.add_argument("--agreement-loss", choices=KINDS, default="mul")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="config override for the models, e.g. train.device=cuda (new runs and resumes)")
    ap.add_argument("--device", default="cpu", help="where the attention for the AER is computed")
    ap.add_argument("--weights", nargs="+", choices=WEIGHTS, default=["attention"],
                    help="which weights to make links from, each scored (and chosen on trial): the "
                         "attention (or head), gradient x input saliency, the mean of those two, the "
                         "attention averaged over the kept snapshots (train.keep_last), the averaged "
                         "snapshots' attention")
    ap.add_argument("--ensemble", nargs="+", default=[], metavar="WORK",
                    help="other --work directories of this script (their models trained the same "
                         "way, e.g. with another train.seed): their weights are averaged with this "
                         "run's before links are made")
    ap.add_argument("--last-snapshots", type=int, default=0, metavar="N",
                    help="--weights snapshot-mean/averaged: the last N kept snapshots only (0: all)")
    ap.add_argument("--skip-eflomal", action="store_true")
    ap.add_argument("--bleu-weights", choices=["best", "last"], default="best",
                    help="the BLEU of each model's best-validated weights, or of its last")
    ap.add_argument("--bleu-sentences", type=int, default=2000,
                    help="BLEU of each model on a seeded sample of this many Hansards test pairs (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.agreement and args.both_directions:
        ap.error("--agreement trains both directions itself: leave out --both-directions")
    return args


def main() -> None:
    args = parse_args()
    data, work = Path(args.data), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    paths = prepare(data, work, args.sentences, args.seed)
    model, reverse = work / "model", (work / "model_en_fr" if args.both_directions else None)
    if args.agreement:  # one joint run: the reverse model is the run's reverse/ directory
        model = work / f"model_agree-{args.agreement_loss}-{args.agreement:g}"
        reverse = model / "reverse"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.time()
    # the two directions train at once, each a process of its own (--threads threads each)
    jobs = [(model, "fr", "en")] + ([(reverse, "en", "fr")] if args.both_directions else [])
    with ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(lambda job: train_model(job[0], paths, job[1], job[2], args, env), jobs))
    result = {"date": time.strftime("%Y-%m-%d"), "machine": f"{cpu_name()}, {os.cpu_count()} cores",
              "cpu_features": cpu_features(),
              "command": " ".join(["python -m benchmarks.hansards_aer", *sys.argv[1:]]),
              "train_pairs": len(Path(paths["train.fr"]).read_text(encoding="utf-8").splitlines()),
              "train_seconds_this_call": round(time.time() - start, 1),
              "steps": {m.name: json.loads((m / "train_state.json").read_text())["step"]
                        for m in (model, reverse) if m is not None and (m / "train_state.json").exists()},
              "attention": attention_aer(model, paths, data, reverse, args.device, tuple(args.weights),
                                         args.last_snapshots, tuple(map(Path, args.ensemble)))}
    if args.ensemble:
        result["ensemble"] = args.ensemble
    if args.bleu_sentences:
        sample = bleu_sample(data, work, args.bleu_sentences, args.seed)
        bleu = partial(model_bleu, device=args.device, weights=args.bleu_weights)
        result["bleu"] = {"fr-en": bleu(model, sample["fr"], sample["en"])}
        if reverse is not None:
            result["bleu"]["en-fr"] = bleu(reverse, sample["en"], sample["fr"])
    if args.agreement:
        result["agreement"] = {"weight": args.agreement, "loss": args.agreement_loss}
    if not args.skip_eflomal:
        result["eflomal"] = eflomal_aer(work, paths, data)
    print_result(result)


if __name__ == "__main__":
    main()
