"""The paper's network, and nothing else: read these files next to Bahdanau et al. (2014).

    model.py           RNNsearch and RNNencdec: Appendix A's equations, the encoders and c_i
    decoder.py         the decoder and deep output both share (Appendix A.2.2), teacher-forced or a step
    gru.py             the gated recurrent unit (Appendix A.1) and its initialisations (Appendix B)
    attention.py       the alignment model a(s_{i-1}, h_j) and the context c_i (Section 3.1, A.1.2)
    output.py          the output layer W_o, and the interface shortlists and int8 decoding reach it by
    search.py          beam search over the decoder (Section 3.2)
    alignment_head.py  the optional alignment head (model.alignment_head; not in the paper)
    reference.py       the same equations in plain NumPy loops, held equal to the above by the tests

Nothing here reads files or knows about tokenisers beyond the reserved ids in decoder.py.
"""
