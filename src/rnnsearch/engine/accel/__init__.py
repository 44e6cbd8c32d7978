"""The speed paths: each a drop-in for a plain path of nn/, computing what it computes, faster.
The product runs them by default; ``plain: true`` in a config (``--plain`` on translate, evaluate and
serve) turns every one of them off. tests/test_accel.py holds each equal to the plain path.

    speedup.py    speed_up(model): the drop-ins swapped into a model — the encoder below, tanh as
                  2σ(2x) − 1 while decoding on a CPU, torch.compile of the teacher-forced step
                  (train.compile); and the search's decoding step: K hypotheses on one row of
                  their sentence's encoding, the output layer on growing rows or a shortlist's
    encoder.py    the encoder's GRUs: torch's fused kernel (cudnn form), both directions in one
                  loop (paper form)
    inflight.py   the product's beam search: batched over sentences in flight, two-stage top-k,
                  greedy's own path (nn/search.py is the plain one, one sentence at a time)
    quantize.py   --quantize int8: the decoder's per-word products as dynamic int8 products
    shortlist.py  --shortlist: the output layer over the words a sentence may need
    graphs.py     --cuda-graphs: each decoding step replayed from a captured CUDA graph
"""
