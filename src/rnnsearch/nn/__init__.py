"""The paper's network, and nothing else: read these files next to Bahdanau et al. (2014).

    gru.py        the gated recurrent unit (Appendix A.1) and its initialisations (Appendix B)
    attention.py  the alignment model a(s_{i-1}, h_j) and the context c_i (Section 3.1, A.1.2)
    model.py      RNNsearch and RNNencdec: encoder, decoder, deep output (Appendix A)
    search.py     beam search over the decoder (Section 3.2)
    reference.py  the same equations in plain NumPy loops, held equal to the above by the tests

Nothing here reads files or knows about tokenisers beyond the reserved ids in model.py.
"""
