"""Scoring with sacrebleu on detokenised text: BLEU and chrF with their signatures."""

from __future__ import annotations

from collections.abc import Callable

import sacrebleu


def score_corpus(hyps: list[str], refs: list[str], tokenize: str | None = None) -> dict:
    """Corpus BLEU and chrF (cased). `tokenize` picks sacrebleu's tokenizer (default 13a;
    'zh' for Chinese)."""
    if not hyps:
        return {"bleu": None, "chrf": None}
    bleu = sacrebleu.metrics.BLEU(tokenize=tokenize) if tokenize else sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hyps, [refs])
    c = chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature()),
            "bleu_detail": str(b)}


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
