"""The system around the network: text in, text out, and the training that gets there.

    vocab.py        tokenisers (sentencepiece or the paper's word lists) with shared reserved ids
    data.py         reading parallel text, batching (the paper's sort-by-length or buckets)
    prepared.py     corpora encoded once, in parallel, into memory-mapped arrays
    checkpoint.py   model directories: weights, config, vocabularies, resumable state
    distributed.py  the device and, under torchrun, the process group
    precision.py    `precision: auto`: bf16 only where it measures faster here
    translate.py    Translator: sentences to translations, with attention
    quantize.py     int8 decoding: the decoder's per-word products as dynamic int8 products
    graphs.py       CUDA-graph decoding: each decoding step replayed from a captured graph
    evaluate.py     BLEU and chrF (sacrebleu), by length bucket
    alignment.py    attention as word alignment: links, symmetrisation, AER
    aligner.py      eflomal on the training corpus: links per pair at the model's pieces, a lexicon
    markup.py       inline tags carried across a translation by its word alignment
    objective.py    the training objective: the NLL, and LossTerm, the terms a run adds to it
    train.py        the training loop (Trainer), one for every kind of run
    guided.py       GuidedAlignment: the term that teaches the attention given word links
    agreement.py    Agreement: the term that trains both directions to agree on attention

Imports run downwards only: engine/ uses nn/ and the root modules, never tools/.
"""
