"""Scoring with sacrebleu on detokenised text: BLEU, chrF and TER with their signatures, and
sacrebleu's paired significance tests between systems."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import sacrebleu
from sacrebleu.metrics.base import Metric

METRICS = ("bleu", "chrf", "ter")  # the keys of score_corpus and paired_significance, in order
SEED = 12345  # sacrebleu's default SACREBLEU_SEED
PAIRED_BS_N = 1000  # sacrebleu's default bootstrap resamples (--paired-bs-n)
PAIRED_AR_N = 10000  # sacrebleu's default approximate-randomisation trials (--paired-ar-n)


def sacrebleu_metrics(tokenize: str | None = None, refs: list[str] | None = None) -> dict[str, Metric]:
    """BLEU (cased; `tokenize`: sacrebleu's tokenizer, default 13a, 'zh' for Chinese), chrF and
    TER (sacrebleu's defaults), with `refs` cached where given."""
    cached = None if refs is None else [refs]
    bleu = sacrebleu.metrics.BLEU(tokenize=tokenize, references=cached) if tokenize else \
        sacrebleu.metrics.BLEU(references=cached)
    return {"bleu": bleu, "chrf": sacrebleu.metrics.CHRF(references=cached),
            "ter": sacrebleu.metrics.TER(references=cached)}


def score_corpus(hyps: list[str], refs: list[str], tokenize: str | None = None) -> dict:
    """Corpus BLEU (cased), chrF and TER, with signatures. `tokenize`: BLEU's tokenizer (default
    13a; 'zh' for Chinese)."""
    if not hyps:
        return {"bleu": None, "chrf": None, "ter": None}
    metrics = sacrebleu_metrics(tokenize)
    scores = {k: m.corpus_score(hyps, [refs]) for k, m in metrics.items()}
    return {**{k: round(s.score, 2) for k, s in scores.items()},
            **{f"{k}_signature": str(m.get_signature()) for k, m in metrics.items()},
            "bleu_detail": str(scores["bleu"])}


@contextmanager
def sacrebleu_seed(seed: int) -> Iterator[None]:
    """SACREBLEU_SEED set to `seed` for the block: sacrebleu's paired tests read their seed there."""
    before = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if before is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = before


def paired_significance(systems: list[tuple[str, list[str]]], refs: list[str], tokenize: str | None = None,
                        bs_samples: int = PAIRED_BS_N, ar_samples: int = PAIRED_AR_N,
                        seed: int = SEED) -> dict:
    """Each system after the first (the baseline) against it, by sacrebleu's PairedTest: paired
    bootstrap resampling (Koehn 2004; `bs_samples` resamples) and approximate randomisation
    (Riezler & Maxwell 2005; `ar_samples` trials), both seeded with `seed` (>= 1: sacrebleu takes
    0 for unseeded).

    Per metric of METRICS: score, the bootstrap's mean and 95% confidence half-width ci (the
    baseline's too), p_bs and p_ar, and significant (both below 0.05). sacrebleu counts only
    resamples strictly beyond the observed difference, so identical outputs would get the smallest
    p-value: a system whose lines equal the baseline's gets p = 1 (identical: true).
    """
    from sacrebleu.significance import PairedTest, Result

    if len(systems) < 2:
        raise ValueError("paired significance tests compare two or more systems")
    if seed < 1:
        raise ValueError(f"seed {seed}: sacrebleu takes 0 for unseeded; give 1 or more")
    runs = {}
    with sacrebleu_seed(seed):
        for test, n in (("bs", bs_samples), ("ar", ar_samples)):
            named: list[tuple[str, Sequence[str]]] = list(systems)
            signatures, table = PairedTest(named, sacrebleu_metrics(tokenize, refs), references=None,
                                           test_type=test, n_samples=n)()
            columns = [c for c in table if c != "System"]  # sacrebleu's names (BLEU, chrF2, TER), in order
            runs[test] = ({k: signatures[c] for k, c in zip(METRICS, columns)},
                          {k: table[c] for k, c in zip(METRICS, columns)})
    (signatures, boot), (_, rand) = runs["bs"], runs["ar"]
    out: dict = {"baseline": systems[0][0], "seed": seed, "paired_bs_n": bs_samples,
                 "paired_ar_n": ar_samples}
    for k, sig in signatures.items():
        sig.update("ar", ar_samples)  # one signature for both tests, as sacrebleu writes it for AR + bs
        out[f"{k}_signature"] = sig.format()
    rows = []
    for i, (label, hyps) in enumerate(systems):
        row: dict = {"label": label}
        identical = i > 0 and hyps == systems[0][1]
        for k in METRICS:
            b, a = boot[k][i], rand[k][i]
            assert isinstance(b, Result) and isinstance(a, Result)
            cell = {"score": round(b.score, 2), "mean": round(float(b.mean or 0), 2),
                    "ci": round(float(b.ci or 0), 2)}
            if i > 0:
                p_bs, p_ar = (1.0, 1.0) if identical else (round(b.p_value or 0, 4), round(a.p_value or 0, 4))
                cell.update(p_bs=p_bs, p_ar=p_ar, significant=p_bs < 0.05 and p_ar < 0.05)
            row[k] = cell
        if identical:
            row["identical"] = True
        rows.append(row)
    out["systems"] = rows
    return out


DEFAULT_EDGES = (10, 20, 30, 40, 50, 60)


def bucket_label(lo: int, hi: int | None) -> str:
    return f"{lo}-{hi}" if hi is not None else f"{lo}+"


def bleu_by_length(sources: list[str], hyps: list[str], refs: list[str], edges=DEFAULT_EDGES,
                   tokenize: str | None = None) -> list[dict]:
    """Corpus BLEU per source-length bucket (paper Figure 2).

    A sentence of n source words (whitespace) falls in the bucket lo < n <= hi; the
    first bucket starts at 0 and the last is open (> last edge). Empty buckets are kept
    with bleu None, so curves of several systems line up.
    """
    bounds = [0, *edges]
    buckets = []
    for k, lo in enumerate(bounds):
        hi = bounds[k + 1] if k + 1 < len(bounds) else None
        idx = [i for i, s in enumerate(sources) if lo < len(s.split()) <= (hi if hi is not None else 10 ** 9)
               or (k == 0 and len(s.split()) == 0)]
        entry = {"bucket": bucket_label(lo, hi), "lo": lo, "hi": hi, "sentences": len(idx), "bleu": None}
        if idx:
            bleu = sacrebleu.metrics.BLEU(tokenize=tokenize) if tokenize else sacrebleu.metrics.BLEU()
            score = bleu.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]])
            entry["bleu"] = round(score.score, 2)
        buckets.append(entry)
    return buckets


def no_unk_subset(sources: list[str], refs: list[str], source_ids: Callable[[str], list[int]],
                  target_ids: Callable[[str], list[int]]) -> list[int]:
    """Positions of the sentences whose source and reference hold no unknown word: the paper's
    "No UNK" column (Table 1), scored on the sentences a 30k-word shortlist covers.

    `source_ids` and `target_ids` map a sentence to the ids the model reads, normalised (and
    lower-cased) as in training: a Translator's ``source_ids`` and ``target_ids``. A word
    vocabulary maps a word outside it to <unk>; a sentencepiece model maps a character it has no
    piece for to <unk>, and one with byte_fallback never does (every sentence is then kept).
    """
    from rnnsearch.engine.data.vocab import UNK

    return [i for i, (s, r) in enumerate(zip(sources, refs))
            if UNK not in source_ids(s) and UNK not in target_ids(r)]
