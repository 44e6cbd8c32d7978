"""Text out: sentences to translations (what makes decoding faster is in engine/accel/).

    translator.py  Translator: sentences to translations, with attention and word links
    scoring.py     log p(y | x) of given translations (forced decoding): `rnnsearch score`
    markup.py      inline tags carried across a translation by its word alignment
    evaluate.py    BLEU and chrF (sacrebleu), by length bucket
"""
