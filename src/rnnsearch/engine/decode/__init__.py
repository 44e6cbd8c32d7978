"""Text out: sentences to translations, and what makes decoding faster or richer.

    translator.py  Translator: sentences to translations, with attention and word links
    quantize.py    int8 decoding: the decoder's per-word products as dynamic int8 products
    shortlist.py   lexical shortlists: the output layer over the words a sentence may need
    graphs.py      CUDA-graph decoding: each decoding step replayed from a captured graph
    markup.py      inline tags carried across a translation by its word alignment
    evaluate.py    BLEU and chrF (sacrebleu), by length bucket
"""
