"""Word alignment: which source word each target word came from.

    links.py     attention as word alignment: links, symmetrisation, AER, Pharaoh format
    saliency.py  gradient × input saliency: rows to link by from what each prediction is sensitive to
    eflomal.py   eflomal on the training corpus: links per pair at the model's pieces, a lexicon
"""
