"""Word alignment: which source word each target word came from.

    links.py    attention as word alignment: links, symmetrisation, AER, Pharaoh format
    eflomal.py  eflomal on the training corpus: links per pair at the model's pieces, a lexicon
"""
