"""Text in: what a run reads and how it is cut into batches.

    vocab.py     tokenisers (sentencepiece or the paper's word lists) with shared reserved ids
    parallel.py  reading parallel text, normalisation, batching (the paper's sort-by-length or buckets)
    prepared.py  corpora encoded once, in parallel, into memory-mapped arrays
    pairs.py     a config's vocabularies and training pairs: built, prepared or loaded
"""
