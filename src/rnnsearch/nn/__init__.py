"""The paper's network, and nothing else: read these files next to Bahdanau et al. (2014).

    reference.py       the whole method in plain NumPy, one sentence at a time, each line an equation:
                       encoder, alignment model, decoder, deep output, log-likelihood, beam search
    model.py           RNNsearch and RNNencdec in PyTorch: every parameter in the paper's notation,
                       teacher forcing (``forward``) and one decoding step (``step``)
    gru.py             the gated recurrent unit (Appendix A.1) and its initialisations (Appendix B)
    attention.py       the alignment model a(s_{i-1}, h_j) and the context c_i (Section 3.1, A.1.2)
    search.py          beam search over the decoder (Section 3.2), one sentence at a time
    alignment_head.py  the optional alignment head (model.alignment_head; not in the paper)

The tests hold model.py and search.py equal to reference.py. What makes them fast in the product
lives in engine/accel/, swapped in over the plain paths marked here; ``plain: true`` (``--plain``)
turns it all off. Nothing here reads files or knows about tokenisers beyond the reserved ids in
model.py.
"""
