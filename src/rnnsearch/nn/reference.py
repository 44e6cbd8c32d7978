"""The whole method in plain NumPy, one sentence at a time: read this file first.

It follows Bahdanau, Cho & Bengio (2014), Appendix A and Section 3.2, one vector at a time, so
each line maps onto an equation (biases, which the appendix omits, are added). It is the
implementation the tests hold everything else to: the PyTorch model (nn/model.py) computes the
same log-probabilities and attention, and the product's beam search finds the same n-best lists
(tests/test_reference.py). Nothing here is fast; nothing here is left out.

A.1.1  GRU (gate order in the stacked matrices: [r, z, h̃])
    r_i = σ(W_r x_i + U_r h_{i-1} + b_r)
    z_i = σ(W_z x_i + U_z h_{i-1} + b_z)
    paper:  h̃_i = tanh(W x_i + U [r_i ∘ h_{i-1}] + b)
    cudnn:  h̃_i = tanh(W x_i + b + r_i ∘ (U h_{i-1} + b_U))
    h_i = (1 - z_i) ∘ h_{i-1} + z_i ∘ h̃_i
A.2.1  Encoder: →h_j and ←h_j are GRUs over E x_j; annotation h_j = [→h_j ; ←h_j].
A.2.2  Decoder:
    s_0  = tanh(W_s ←h_1)                   (init_state "mean": tanh(W_s mean_j h_j))
    e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)  (or a dot-product score, see ``scores``)
    α_ij = exp(e_ij) / Σ_k exp(e_ik);  c_i = Σ_j α_ij h_j
    s_i  = GRU with input [E y_{i-1} ; c_i] and state s_{i-1}
    t̃_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i;  t_i,j = max(t̃_i,2j-1, t̃_i,2j)
    p(y_i | ·) = softmax(W_o t_i)
3.1    log p(y | x) = Σ_i log p(y_i | y_<i, x), y ending with </s>: what training maximises
3.2    beam search: the K best partial translations, extended a word at a time
RNNencdec (Cho et al. 2014): one forward GRU, c = tanh(V h_Tx), s_0 = tanh(V' c), and
the same decoder with the fixed c in place of every c_i.

Parameters come as a dict of float64 arrays keyed like ``RNNsearch.state_dict()``
(``enc_fwd.W.weight``, ``attention.U_a.bias``, ...). ``torch.nn.Linear`` stores a
weight as (out, in), so ``W @ x`` below is the paper's ``W x``. The decoder's input
matrix is stored in two pieces: ``decoder.W`` acts on E y_{i-1}, ``C`` on c_i.
Dropout is not modelled: this is the evaluation-mode forward pass.
"""

from __future__ import annotations

import numpy as np

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # the ids every tokeniser reserves (model.py)


def state_dict_to_numpy(model) -> dict[str, np.ndarray]:
    """The model's parameters as float64 NumPy arrays, under their state_dict names."""
    return {k: v.detach().cpu().double().numpy() for k, v in model.state_dict().items()}


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(e):
    e = np.exp(e - e.max())  # shifting by the max changes nothing but avoids overflow
    return e / e.sum()


def log_softmax(a):
    a = a - a.max()
    return a - np.log(np.exp(a).sum())


def affine(p, name, x):
    """W x + b for the Linear layer ``name`` (b only if that layer has one)."""
    y = p[name + ".weight"] @ x
    return y + p[name + ".bias"] if name + ".bias" in p else y


# -- A.1.1 the gated recurrent unit ------------------------------------------------

def gru_step(p, name, wx, h, variant):
    """One step of the GRU ``name``. wx = W x_i + b, already stacked as [r, z, h̃] (3n).

    The input side is passed in precomputed because the decoder's input is two
    vectors (E y_{i-1} and c_i) whose matrices are stored separately.
    """
    wx_r, wx_z, wx_h = np.split(wx, 3)
    U_r, U_z, U = np.split(p[name + ".U.weight"], 3)
    if variant == "cudnn":  # U has its own bias b_U, which must sit inside r ∘ (...)
        b_Ur, b_Uz, b_U = np.split(p[name + ".U.bias"], 3)
    else:
        b_Ur = b_Uz = b_U = 0.0
    r = sigmoid(wx_r + U_r @ h + b_Ur)
    z = sigmoid(wx_z + U_z @ h + b_Uz)
    if variant == "cudnn":
        h_tilde = np.tanh(wx_h + r * (U @ h + b_U))
    else:
        h_tilde = np.tanh(wx_h + U @ (r * h))
    return (1.0 - z) * h + z * h_tilde  # z weights the new candidate (paper's convention)


def gru_run(p, name, xs, n, variant, backward=False):
    """h_1..h_Tx of GRU ``name`` over the vectors xs, starting from h_0 = 0.

    Returned in source order, so for the backward GRU hs[0] is ←h_1.
    """
    order = range(len(xs) - 1, -1, -1) if backward else range(len(xs))
    h, hs = np.zeros(n), [None] * len(xs)
    for j in order:
        h = gru_step(p, name, affine(p, name + ".W", xs[j]), h, variant)
        hs[j] = h
    return hs


# -- A.2.1 encoders -----------------------------------------------------------------

def encode_rnnsearch(p, cfg, src):
    """Annotations H (Tx, 2n) and s_0 for one unpadded source sentence."""
    ex = p["src_emb.weight"][src]  # E x_j; both directions share the embedding
    fwd = gru_run(p, "enc_fwd", ex, cfg.hidden, cfg.gru)
    bwd = gru_run(p, "enc_bwd", ex, cfg.hidden, cfg.gru, backward=True)
    H = np.stack([np.concatenate([f, b]) for f, b in zip(fwd, bwd)])
    # ←h_1 has read the whole sentence, last word first; "mean" is the dl4mt/Nematus choice.
    summary = H.mean(0) if cfg.init_state == "mean" else bwd[0]
    s0 = np.tanh(affine(p, "W_s", summary))
    return H, s0


def encode_rnnencdec(p, cfg, src):
    """The fixed context c = tanh(V h_Tx) and s_0 = tanh(V' c) (Cho et al. 2014)."""
    ex = p["src_emb.weight"][src]
    h_last = gru_run(p, "enc_fwd", ex, cfg.hidden, cfg.gru)[-1]
    c = np.tanh(affine(p, "V", h_last))
    return c, np.tanh(affine(p, "V_s", c))


# -- A.2.2 alignment model --------------------------------------------------------

def keys(p, cfg, H):
    """The part of e_ij that depends on h_j only: once per sentence, not per target word."""
    if cfg.score == "additive":
        return np.stack([affine(p, "attention.U_a", h) for h in H])  # U_a h_j + b_a
    return np.stack([p["attention.W_k.weight"] @ h for h in H])  # k_j = W_k h_j (2n -> n)


def scores(p, cfg, s_prev, K):
    """e_ij for every source word j, given s_{i-1} and the keys K."""
    if cfg.score == "additive":
        Wa_s = p["attention.W_a.weight"] @ s_prev
        v_a = p["attention.v_a.weight"][0]
        return np.array([v_a @ np.tanh(Wa_s + k) for k in K])
    q = p["attention.W_g.weight"] @ s_prev if cfg.score == "general" else s_prev
    e = np.array([q @ k for k in K])  # dot: s_{i-1}ᵀ k_j;  general: (W_g s_{i-1})ᵀ k_j
    return e / np.sqrt(cfg.hidden) if cfg.score == "scaled_dot" else e


def attend(p, cfg, s_prev, H, K):
    """The three steps: align, normalise, weighted context. Returns c_i (2n) and α_i (Tx)."""
    e = scores(p, cfg, s_prev, K)
    alpha = softmax(e)
    c = alpha @ H  # Σ_j α_ij h_j
    return c, alpha


# -- A.2.2 decoder and deep output -------------------------------------------------

def deep_output(p, s_read, ey, c):
    """log p(y_i | y_<i, x) from the state read out, E y_{i-1} and c_i."""
    t_tilde = affine(p, "U_o", s_read) + p["V_o.weight"] @ ey + p["C_o.weight"] @ c  # 2l
    t = t_tilde.reshape(-1, 2).max(1)  # maxout over adjacent pairs -> l
    return log_softmax(affine(p, "W_o", t))


def encode(p, cfg, src):
    """What the decoder reads of one source sentence: (H, K) the annotations and their keys
    (RNNsearch), or the fixed context c (RNNencdec), and s_0."""
    if cfg.arch == "rnnsearch":
        H, s0 = encode_rnnsearch(p, cfg, src)
        return (H, keys(p, cfg, H)), s0
    return encode_rnnencdec(p, cfg, src)


def decoder_step(p, cfg, memory, s_prev, y_prev):
    """One target word: log p(y_i | y_<i, x) (V), s_i and α_i (None for RNNencdec), from
    s_{i-1} and y_{i-1}."""
    ey = p["tgt_emb.weight"][y_prev]  # E y_{i-1}
    if cfg.arch == "rnnsearch":
        H, K = memory
        c, alpha = attend(p, cfg, s_prev, H, K)  # from s_{i-1}
    else:
        c, alpha = memory, None  # RNNencdec: the same c at every step
    # W [E y_{i-1}; c_i] + b, with W split into decoder.W (on E y) and C (on c).
    wx = affine(p, "decoder.W", ey) + p["C.weight"] @ c
    s = gru_step(p, "decoder", wx, s_prev, cfg.gru)
    # Appendix A reads out s_{i-1}; readout "new" reads out s_i instead.
    s_read = s_prev if cfg.readout == "prev" else s
    return deep_output(p, s_read, ey, c), s, alpha


def forward_sentence(p, cfg, src, tgt_in):
    """Teacher-forced decoding of one sentence: src holds its real words only, and
    tgt_in = <s> y_1 .. y_{T-1} (padding there too gets a distribution, as in the model).

    Returns log-probs (T, V) and attention (T, Tx), or None for RNNencdec.
    """
    memory, s = encode(p, cfg, src)
    log_probs, alphas = [], []
    for y_prev in tgt_in:
        lp, s, alpha = decoder_step(p, cfg, memory, s, y_prev)
        log_probs.append(lp)
        alphas.append(alpha)
    return np.stack(log_probs), (np.stack(alphas) if cfg.arch == "rnnsearch" else None)


def log_likelihood(p, cfg, src, tgt):
    """log p(y | x) of the target words `tgt` (without <s> and </s>) given the source words `src`:
    the sum over i of log p(y_i | y_<i, x), </s> included (Section 3.1)."""
    y = list(tgt) + [EOS]
    lp, _ = forward_sentence(p, cfg, src, [BOS] + list(tgt))
    return float(sum(lp[i, w] for i, w in enumerate(y)))


# -- 3.2 beam search -----------------------------------------------------------------

def beam_search(p, cfg, src, K=5, alpha=1.0, max_len_ratio=2.0, n_best=1, early_stop=None):
    """The `n_best` translations of one source sentence, best first, as (words, score, log p):
    words without <s> and </s>, score = log p(y | x) / |y|**alpha (|y| counting </s>).

    The beam keeps the K best hypotheses. Each step, every hypothesis still growing proposes its K
    most probable next words (<s> and <pad> never; only </s> at the length limit, ratio * |x| + 10
    words); one that has ended with </s> stays as it is. All compete by score, the K best go on.
    The search ends when the whole beam has ended, or with `early_stop` when its n_best best have
    (the default: early only with alpha = 0, where a growing hypothesis cannot overtake)."""
    early_stop = alpha == 0 if early_stop is None else early_stop
    memory, s0 = encode(p, cfg, src)
    limit = int(np.float32(len(src)) * np.float32(max_len_ratio)) + 10  # words before </s> is forced
    score = lambda words, lp: lp / max(1, len(words)) ** alpha if alpha else lp  # noqa: E731
    beam = [([], 0.0, s0)]  # (words so far, log p, decoder state)
    while True:
        candidates = []
        for words, lp, s in beam:
            if words and words[-1] == EOS:  # ended: competes as it is
                candidates.append((words, lp, s))
                continue
            log_p, s_new, _ = decoder_step(p, cfg, memory, s, words[-1] if words else BOS)
            log_p[[BOS, PAD]] = -np.inf  # never generated
            best = [EOS] if len(words) >= limit else np.argsort(-log_p, kind="stable")[:K]
            candidates += [(words + [int(w)], lp + log_p[w], s_new) for w in best if log_p[w] > -np.inf]
        candidates.sort(key=lambda c: -score(c[0], c[1]))  # stable: ties keep their order
        beam = candidates[:K]
        if all(words[-1] == EOS for words, _, _ in (beam[:n_best] if early_stop else beam)):
            break
    ended = [(words[:-1], score(words, lp), lp) for words, lp, _ in beam if words[-1] == EOS]
    return ended[:n_best]


def forward(params, cfg, src, src_mask, tgt_in):
    """Like ``RNNsearch.forward(src, src_mask, tgt_in)`` for a padded batch.

    src, src_mask (B, S) with src_mask True on real words; tgt_in (B, T).
    Returns log-probs (B, T, V) and attention (B, T, S) (zero on padding), or None
    for the ``rnnencdec`` architecture.
    """
    src, src_mask, tgt_in = (np.asarray(a) for a in (src, src_mask, tgt_in))
    src_mask = src_mask.astype(bool)
    B, S = src.shape
    T = tgt_in.shape[1]
    out_lp, out_att = [], np.zeros((B, T, S))
    for b in range(B):
        # Padding is simply left out: the sentence is run on its real words alone.
        lp, alpha = forward_sentence(params, cfg, src[b][src_mask[b]], tgt_in[b])
        out_lp.append(lp)
        if alpha is not None:
            out_att[b][:, src_mask[b]] = alpha  # scatter back; padded columns stay 0
    return np.stack(out_lp), (out_att if cfg.arch == "rnnsearch" else None)
