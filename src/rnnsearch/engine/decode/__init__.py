"""Text out: sentences to translations (what makes decoding faster is in engine/accel/).

    translator.py  Translator: sentences to translations, with attention and word links
    loading.py     load(): a model directory (or several, an ensemble) as a Translator
    scoring.py     log p(y | x) of given translations (forced decoding): `rnnsearch score`
    sampling.py    translations drawn from the model (temperature, top-k, top-p): `--sample`
    ensemble.py    several models searched as one, their probabilities averaged: `--model A --model B`
    constraints.py phrases every translation must contain (dynamic beam allocation): `--constraints`
    markup.py      inline tags carried across a translation by its word alignment
    beamtrace.py   the search step by step, for learners: `--beam-trace`
    evaluate.py    BLEU and chrF (sacrebleu), by length bucket
"""
