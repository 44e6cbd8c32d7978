"""Scoring with sacrebleu on detokenised text: BLEU and chrF with their signatures."""

from __future__ import annotations

import sacrebleu


def score_corpus(hyps: list[str], refs: list[str], tokenize: str | None = None) -> dict:
    """Corpus BLEU and chrF (cased). `tokenize` picks sacrebleu's tokenizer (default 13a; 'zh' for Chinese)."""
    bleu = sacrebleu.metrics.BLEU(tokenize=tokenize) if tokenize else sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hyps, [refs])
    c = chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature()),
            "bleu_detail": str(b)}
