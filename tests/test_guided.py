"""Guided alignment (engine/train/guided.py): the gold attention, the two losses, the one-step shift, links
read from a file onto the training tokens, and training that moves the attention where it is told."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import rnnsearch
from rnnsearch.config import ConfigError, ModelConfig, config_from_dict
from rnnsearch.engine.train.guided import gold_attention, guide_weight, guided_loss
from rnnsearch.io import DataError
from rnnsearch.nn.model import build_model
from tests.conftest import random_batch, tiny_model


def test_gold_attention_normalises_each_linked_row_and_leaves_the_rest_zero():
    links = [np.array([[0, 0], [2, 0], [1, 2]]), None, np.zeros((0, 2), np.int64)]
    gold = gold_attention(links, src_len=3, rows=4)
    assert gold.shape == (3, 4, 3)
    assert gold[0, 0].tolist() == [0.5, 0.0, 0.5]  # target token 0 linked to sources 0 and 2
    assert gold[0, 1].tolist() == [0.0, 0.0, 0.0]  # target token 1: no link, no row
    assert gold[0, 2].tolist() == [0.0, 1.0, 0.0]
    assert gold[0, 3].tolist() == [0.0, 0.0, 0.0]  # the </s> row: the source has no end token
    assert not gold[1:].any()  # no links at all
    shifted = gold_attention(links, src_len=3, rows=4, shift=1)
    assert torch.equal(shifted[0, 1:], gold[0, :3]) and not shifted[0, 0].any()  # row t + 1


def test_the_losses_on_a_hand_made_case():
    alpha = torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]])
    gold = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]])  # row 2 unaligned
    ce = -(np.log(0.7) + 0.5 * np.log(0.1) + 0.5 * np.log(0.8))
    assert guided_loss(alpha, gold, "ce").item() == pytest.approx(ce, rel=1e-5)
    mse = (0.3 ** 2 + 0.2 ** 2 + 0.1 ** 2) + (0.1 ** 2 + 0.4 ** 2 + 0.3 ** 2)
    assert guided_loss(alpha, gold, "mse").item() == pytest.approx(mse, rel=1e-5)
    # what an unaligned row attends to costs nothing, in either loss
    other = alpha.clone()
    other[0, 2] = torch.tensor([0.9, 0.05, 0.05])
    for kind in ("ce", "mse"):
        assert guided_loss(other, gold, kind).item() == pytest.approx(guided_loss(alpha, gold, kind).item())
    with pytest.raises(ValueError, match="ce, mse"):
        guided_loss(alpha, gold, "kl")


def test_the_weight_halves_every_half_life():
    assert guide_weight(0.8, 0, 10_000) == 0.8
    assert guide_weight(0.8, 1000, 0) == 0.8
    assert guide_weight(0.8, 1000, 1000) == pytest.approx(0.4)
    assert guide_weight(0.8, 1000, 3000) == pytest.approx(0.1)


def test_the_attention_row_of_a_word_is_scored_before_the_decoder_reads_it():
    """The shift the loss must handle. Row t of α (0-based: the attention that predicts target
    token t) is scored from the state before step t reads its input, tgt_in[t]; target token t is
    tgt_in[t + 1]. Changing the input read at step k leaves rows 0..k as they were and changes the
    rows after it: no row up to t + 1 has read token t. Shift 0 guides row t, the attention that
    produces the token; shift 1 guides row t + 1, scored from s_t, the state that emitted it."""
    model = tiny_model()
    src, mask = random_batch([5])
    tgt = torch.tensor([[1, 5, 6, 7, 8]])  # <s> y_1 .. y_4 as the decoder reads them
    _, alpha = model(src, mask, tgt)
    changed = tgt.clone()
    changed[0, 2] = 11  # y_2, read at step 2; it is target token 1, predicted by row 1
    _, beta = model(src, mask, changed)
    assert torch.equal(alpha[0, :3], beta[0, :3])
    assert not torch.allclose(alpha[0, 3], beta[0, 3])
    # the loss reads the rows the shift says: shift 1 never the first row, shift 0 never the last
    links = [np.array([[0, 0], [1, 1], [2, 2], [3, 3]])]
    for shift, untouched in ((0, 4), (1, 0)):
        a = alpha.detach().clone().requires_grad_(True)
        guided_loss(a, gold_attention(links, 5, 5, shift).double()).backward()
        assert not a.grad[0, untouched].any() and a.grad[0, 4 - untouched].abs().sum() > 0


def toy_config(tmp: Path, **train):
    from rnnsearch.tools.toy import write_toy_corpus

    files = write_toy_corpus(tmp / "data", task="reverse", n_train=1200, n_valid=40, vocab=30, min_len=4,
                             max_len=8)
    return config_from_dict({"preset": "tiny", "model_dir": str(tmp / "run"), "data": files,
                             "train": {"max_steps": 400, "valid_every": 0, "valid_metric": "loss",
                                       "log_every": 50, "seed": 3, **train}})


def diagonal_links(cfg, path: Path) -> Path:
    """Links that contradict the task: target word j to source word j (the reversal's answer is
    source word n-1-j). Attention follows them only if it is taught to."""
    src = Path(cfg.data.train_src).read_text(encoding="utf-8").splitlines()
    path.write_text("".join(" ".join(f"{j}-{j}" for j in range(len(s.split()))) + "\n" for s in src),
                    encoding="utf-8")
    return path


def attention_on(model_dir: Path, cfg) -> list[np.ndarray]:
    """Each validation pair's teacher-forced attention (target words x source words)."""
    from rnnsearch.engine.data.parallel import ParallelData, collate
    from rnnsearch.engine.decode.loading import load

    translator = load(model_dir, device="cpu")
    srcs = Path(cfg.data.valid_src).read_text(encoding="utf-8").splitlines()
    tgts = Path(cfg.data.valid_tgt).read_text(encoding="utf-8").splitlines()
    data = ParallelData.encode(srcs, tgts, translator.src_tok, translator.tgt_tok, 100)
    batch = collate(data.examples)
    with torch.no_grad():
        _, alpha = translator.model.eval()(batch.src, batch.src_mask, batch.tgt_in)
    return [alpha[b, :len(e.tgt) + 1, :len(e.src)].numpy() for b, e in enumerate(data.examples)]


def share_on(attention: list[np.ndarray], shift: int, target) -> float:
    """The share of target words j whose row j + shift has its argmax on source word target(j, n)."""
    hits = total = 0
    for a in attention:
        n = a.shape[1]
        for j in range(n):
            hits += int(a[j + shift].argmax()) == target(j, n)
            total += 1
    return hits / total


@pytest.mark.parametrize("shift", [0, 1])
def test_training_moves_the_attention_onto_the_given_links(tmp_path, shift):
    cfg = toy_config(tmp_path / "guided", guided_alignment=str(diagonal_links(
        toy_config(tmp_path / "guided"), tmp_path / "diagonal.txt")), guided_alignment_shift=shift)
    rnnsearch.train(cfg)
    log = [json.loads(x) for x in (tmp_path / "guided" / "run" / "log.jsonl").read_text().splitlines()]
    train_records = [r for r in log if r["kind"] == "train"]
    assert train_records[-1]["guided_loss"] < 0.5 * train_records[0]["guided_loss"]
    assert train_records[-1]["guided_weight"] == 1.0
    guided = attention_on(tmp_path / "guided" / "run", cfg)
    assert share_on(guided, shift, lambda j, n: j) >= 0.9
    unguided_cfg = toy_config(tmp_path / "plain")
    rnnsearch.train(unguided_cfg)
    plain = attention_on(tmp_path / "plain" / "run", unguided_cfg)
    assert share_on(plain, shift, lambda j, n: j) <= 0.5  # the diagonal is not what the task teaches


def test_a_links_file_is_mapped_onto_the_prepared_tokens_and_checked(tmp_path):
    from rnnsearch.engine.align.eflomal import links_from_file
    from rnnsearch.engine.data.pairs import prepare
    from rnnsearch.engine.data.vocab import load_tokenizers

    cfg = toy_config(tmp_path, guided_alignment="unused")
    cfg.data.reverse_source = True
    data = prepare(cfg)
    src_tok, tgt_tok = load_tokenizers(tmp_path / "run", cfg.vocab)
    path = diagonal_links(cfg, tmp_path / "links.txt")
    alignment = links_from_file(data, src_tok, tgt_tok, path)
    for k in range(0, len(data), 97):
        n = len(data[k].src)  # a word vocabulary: a token a word; the split holds the source reversed
        assert sorted(map(tuple, alignment[k].tolist())) == sorted((n - 1 - j, j) for j in range(n))
    assert links_from_file(data, src_tok, tgt_tok, path).path == alignment.path  # reused
    lines = path.read_text(encoding="utf-8").splitlines()
    for bad, message in ((["0-0 1-x", *lines[1:]], r"links.txt:1: bad link '1-x'"),
                         (lines[:2] + ["0-0 9-9", *lines[3:]], r"links.txt:3: link 9-9 outside a pair of"),
                         (lines[:-1], r"links.txt: 1199 lines, but the corpus has more"),
                         ([*lines, "0-0"], r"links.txt: more lines than the corpus's 1200")):
        broken = tmp_path / "bad" / "links.txt"
        broken.parent.mkdir(exist_ok=True)
        broken.write_text("\n".join(bad) + "\n", encoding="utf-8")
        with pytest.raises(DataError, match=message):
            links_from_file(data, src_tok, tgt_tok, broken)
    assert not list(data.path.parent.glob(".align-*"))  # nothing half-made is left behind
    with pytest.raises(DataError, match="no such links file"):
        links_from_file(data, src_tok, tgt_tok, tmp_path / "missing.txt")


def test_the_settings_are_checked_and_a_bad_file_leaves_no_model_directory(tmp_path):
    base = toy_config(tmp_path)
    raw = base.to_dict()
    for train, data, message in (({"agreement": 1.0}, {}, "does not combine with train.agreement"),
                                 ({}, {"prepared": False}, "needs data.prepared"),
                                 ({"guided_alignment_shift": 2}, {}, "must be 0 or 1"),
                                 ({"guided_alignment_weight": 0.0}, {}, "must be positive"),
                                 ({"guided_alignment_loss": "kl"}, {}, "guided_alignment_loss")):
        bad = {**raw, "train": {**raw["train"], "guided_alignment": "auto", **train},
               "data": {**raw["data"], **data}}
        with pytest.raises(ConfigError, match=message):
            config_from_dict(bad)
    lines = Path(base.data.train_src).read_text(encoding="utf-8").splitlines()
    (tmp_path / "short.txt").write_text("0-0\n" * (len(lines) - 5), encoding="utf-8")
    with pytest.raises(DataError, match="short.txt: 1195 lines"):
        rnnsearch.train(toy_config(tmp_path, guided_alignment=str(tmp_path / "short.txt")))
    assert not (tmp_path / "run").exists()


def test_auto_aligns_with_eflomal_and_a_resumed_run_reads_the_same_links(tmp_path):
    pytest.importorskip("eflomal", reason="guided_alignment=auto needs eflomal: pip install -e '.[align]'")
    cfg = toy_config(tmp_path, guided_alignment="auto", max_steps=20, log_every=10)
    rnnsearch.train(cfg)
    (folder,) = (tmp_path / "run" / "prepared").glob("align-*")
    made = folder.stat().st_mtime_ns
    assert json.loads((tmp_path / "run" / "train_state.json").read_text())["step"] == 20
    from rnnsearch.cli import main

    assert main(["train", "--resume", str(tmp_path / "run"), "--set", "train.max_steps=40",
                 "--set", "train.progress=false"]) == 0
    assert [p.stat().st_mtime_ns for p in (tmp_path / "run" / "prepared").glob("align-*")] == [made]
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in log if r["kind"] == "train"]
    assert steps == sorted(set(steps)) and {10, 20, 30, 40} <= set(steps)  # and an epoch's end
    assert all(r["guided_loss"] > 0 for r in log if r["kind"] == "train")


def test_the_head_row_of_a_word_has_read_it_and_feeds_nothing_back():
    """β_t (the alignment head's row for target token t) is scored from the state after step
    t + 1, which has read token t: changing token t changes β_t and no earlier row. The head
    changes neither the log-probabilities nor the attention."""
    torch.manual_seed(0)
    cfg = ModelConfig(emb=8, hidden=8, align=8, maxout=8, alignment_head="past")
    model = build_model(cfg, 20, 20).double()
    src, mask = torch.randint(4, 20, (1, 5)), torch.ones(1, 5, dtype=torch.bool)
    tgt = torch.tensor([[2, 5, 6, 7, 8]])  # <s> y_0 .. y_3: rows 0..3 the words, row 4 </s>
    logp, alpha, beta = model(src, mask, tgt, alignment_head=True)
    changed = tgt.clone()
    changed[0, 2] = 11  # target token 1
    _, _, beta2 = model(src, mask, changed, alignment_head=True)
    assert torch.equal(beta[0, :1], beta2[0, :1]) and not torch.equal(beta[0, 1], beta2[0, 1])
    assert torch.allclose(beta[0, :4].sum(-1), torch.ones(4, dtype=beta.dtype)) and not beta[0, 4].any()
    plain = build_model(ModelConfig(emb=8, hidden=8, align=8, maxout=8), 20, 20).double()
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("align_head.")})
    logp2, alpha2 = plain(src, mask, tgt)
    assert torch.equal(logp, logp2) and torch.equal(alpha, alpha2)
    with pytest.raises(ValueError, match="no alignment head"):
        plain(src, mask, tgt, alignment_head=True)


def test_a_head_that_reads_the_future_sees_the_words_after_its_own():
    """model.alignment_head future: β_t also reads tokens t+1 .. (a backward GRU), so changing token 2
    changes the rows of tokens 0 and 1 too (the head without it leaves them); padding after a shorter
    sentence is never read;
    the translation's log-probabilities and attention are those of the model without it."""
    torch.manual_seed(0)
    cfg = ModelConfig(emb=8, hidden=8, align=8, maxout=8, alignment_head="future")
    model = build_model(cfg, 20, 20).double()
    src, mask = torch.randint(4, 20, (2, 5)), torch.ones(2, 5, dtype=torch.bool)
    tgt = torch.tensor([[2, 5, 6, 7, 8], [2, 5, 6, 0, 0]])  # the second: y_0 y_1 </s>, then padding
    logp, alpha, beta = model(src, mask, tgt, alignment_head=True)
    changed = tgt.clone()
    changed[0, 3] = 11  # target token 2
    _, _, beta2 = model(src, mask, changed, alignment_head=True)
    assert all(not torch.allclose(beta[0, t], beta2[0, t], rtol=0, atol=1e-12) for t in range(4))
    _, _, alone = model(src[1:], mask[1:], tgt[1:, :3], alignment_head=True)  # no padding at all
    assert torch.allclose(beta[1, :2], alone[0, :2])
    _, _, packed = model(src, mask, tgt, packed=True, alignment_head=True)  # as training calls it
    assert torch.equal(packed, beta)
    # the backward GRU reads the embeddings detached: row 0's loss reaches the words after token 0
    # only through it, so their embeddings get no gradient from it
    model.zero_grad()
    beta[0, 0].log().sum().backward()
    grad = model.tgt_emb.weight.grad
    assert grad[[6, 7, 8]].abs().sum() == 0 and grad[5].abs().sum() > 0
    assert model.align_head.future.W.weight.grad.abs().sum() > 0
    plain = build_model(ModelConfig(emb=8, hidden=8, align=8, maxout=8), 20, 20).double()
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("align_")})
    logp2, alpha2 = plain(src, mask, tgt)
    assert torch.equal(logp, logp2) and torch.equal(alpha, alpha2)


def test_a_refined_head_starts_as_the_plain_one_and_then_sees_the_whole_matrix():
    """model.alignment_head past+refine: a new refiner (its last convolution zero) leaves β as the
    head alone gives it; once trained, a row depends on its neighbours' scores (a source word
    changed moves the rows of the words beside it), padding on either side is never read, the
    translation is untouched, and the loss reaches both convolutions."""
    torch.manual_seed(0)
    cfg = ModelConfig(emb=8, hidden=8, align=8, maxout=8, alignment_head="past+refine")
    model = build_model(cfg, 20, 20).double()
    src = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
    mask = src != 0
    tgt = torch.tensor([[2, 5, 6, 7, 8], [2, 5, 6, 0, 0]])
    logp, alpha, beta = model(src, mask, tgt, alignment_head=True)
    plain = build_model(ModelConfig(emb=8, hidden=8, align=8, maxout=8, alignment_head="past"), 20, 20)
    plain = plain.double()
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("align_refine.")})
    logp2, alpha2, beta2 = plain(src, mask, tgt, alignment_head=True)
    assert torch.equal(logp, logp2) and torch.equal(alpha, alpha2) and torch.allclose(beta, beta2)
    model.zero_grad()
    beta[0, :4].log().sum().backward()
    assert model.align_head.refine.conv2.weight.grad.abs().sum() > 0
    with torch.no_grad():  # as if trained: the second convolution no longer zero
        model.align_head.refine.conv2.weight.normal_(0, 1.0)
    _, _, beta = model(src, mask, tgt, alignment_head=True)
    assert not torch.allclose(beta, beta2)
    assert torch.allclose(beta[:, :-1].sum(-1)[0], torch.ones(4, dtype=beta.dtype))
    assert not beta[1, :2, 3:].any()  # padded source words get nothing
    _, _, alone = model(src[1:, :3], mask[1:, :3], tgt[1:, :3], alignment_head=True)
    assert torch.allclose(beta[1, :2, :3], alone[0, :2])  # padding, source or target, is not read
    moved = src.clone()
    moved[0, 4] = 12  # the last source word: the head's own score for row 0 reads it through h_j
    _, _, beta3 = model(moved, mask, tgt, alignment_head=True)
    assert not torch.allclose(beta[0], beta3[0])
    model.zero_grad()
    beta[0, :4].log().sum().backward()
    assert model.align_head.refine.conv1.weight.grad.abs().sum() > 0


SEED = int(os.environ.get("RNNSEARCH_TEST_SEED", "3"))  # other seeds stand in for other CPUs


@pytest.mark.parametrize("whole", [False, True], ids=["head", "head+future+refine"])
def test_guided_head_learns_the_links_and_translations_read_their_links_from_it(tmp_path, whole):
    """The diagonal links that contradict the reversal task, taught to the head (alone, or with
    the future and the refiner): the head follows them, the attention is left to the task, and a
    translation's links are the head's."""
    from rnnsearch.engine.decode.loading import load

    links = diagonal_links(toy_config(tmp_path), tmp_path / "d.txt")
    # 1,200 steps (32 epochs), not 400: the head starts from nothing (seed 2 had 0.41 at 400)
    cfg = toy_config(tmp_path, guided_alignment=str(links), max_steps=1200, max_epochs=40, seed=SEED)
    cfg.model.alignment_head = "future+refine" if whole else "past"
    rnnsearch.train(cfg)
    translator = load(tmp_path / "run", device="cpu")
    srcs = Path(cfg.data.valid_src).read_text(encoding="utf-8").splitlines()
    tgts = Path(cfg.data.valid_tgt).read_text(encoding="utf-8").splitlines()
    heads = [np.array(w) for w in translator.force(srcs, tgts, links="head")]
    attention = [np.array(w) for w in translator.force(srcs, tgts)]
    assert share_on(heads, 0, lambda j, n: j) >= 0.9
    assert share_on(attention, 0, lambda j, n: j) <= 0.5  # the attention is not pulled along
    t = translator.translate([srcs[0]])[0]
    assert t.aligned is not None and len(t.aligned) == len(t.tokens) + 1
    if t.text == tgts[0]:
        assert t.alignment == [(j, j) for j in range(len(srcs[0].split()))]
    # links="mean": the head's rows (not the attention's) averaged with the saliency's
    salient = [np.array(w) for w in translator.force(srcs, tgts, links="saliency")]
    mean = [np.array(w) for w in translator.force(srcs, tgts, links="mean")]
    for m, h, s in zip(mean, heads, salient):
        np.testing.assert_allclose(m, (h + s) / 2, atol=1e-6)
    t = translator.translate([srcs[0]], links="mean")[0]
    assert t.aligned == translator.force([srcs[0]], [t.text], links="mean")[0]


def test_the_head_needs_guidance_and_shift_0(tmp_path):
    raw = toy_config(tmp_path).to_dict()
    with pytest.raises(ConfigError, match="model.alignment_head"):
        config_from_dict({**raw, "model": {**raw["model"], "alignment_head": "past"}})
    with pytest.raises(ConfigError, match="must be 0 with model.alignment_head"):
        config_from_dict({**raw, "model": {**raw["model"], "alignment_head": "future+refine"},
                          "train": {**raw["train"], "guided_alignment": "auto", "guided_alignment_shift": 1}})
    with pytest.raises(ConfigError, match="model.alignment_head: expected one of 'none' | 'past'"):
        config_from_dict({**raw, "model": {**raw["model"], "alignment_head": "refine"}})


OLD_HEADS = {(False, False, False): "none", (True, False, False): "past", (True, True, False): "future",
             (True, False, True): "past+refine", (True, True, True): "future+refine"}


@pytest.mark.parametrize("old, new", list(OLD_HEADS.items()), ids=list(OLD_HEADS.values()))
def test_the_old_head_booleans_are_refused_in_a_config_with_the_new_values_named(tmp_path, old, new):
    """model.alignment_head is one key; its three old booleans (alignment_head, _future, _refine),
    in a config file or --set, fail with the values to use instead."""
    from rnnsearch.config import load_config

    on, future, refine = old
    flags = [f"model.alignment_head={str(on).lower()}"]
    flags += ["model.alignment_head_future=true"] * future + ["model.alignment_head_refine=true"] * refine
    with pytest.raises(ConfigError, match=r"model.alignment_head(_future|_refine)?: the alignment head is "
                                          r"one key, model.alignment_head: none \| past \| future \| "
                                          r"past\+refine \| future\+refine"):
        load_config(None, flags + ["train.guided_alignment=auto"])
    guided = ["train.guided_alignment=auto"] if new != "none" else []
    assert load_config(None, [f"model.alignment_head={new}", *guided]).model.alignment_head == new


@pytest.mark.parametrize("old, new", list(OLD_HEADS.items()), ids=list(OLD_HEADS.values()))
def test_a_model_directory_saved_with_the_old_head_booleans_loads_as_it_was(tmp_path, old, new):
    """Before the one key, config.json held three booleans and the head's tensors were saved as
    align_future.*, align_head.*, align_refine.*: such a directory reads as the one key, its weights
    load into the model it builds (saved again under the same names), and the model computes what
    the saved one did."""
    from rnnsearch.engine.checkpoint import load_weights, read_config, save_weights

    cfg = toy_config(tmp_path, **({"guided_alignment": "auto"} if new != "none" else {}))
    cfg.model.alignment_head = new
    torch.manual_seed(0)
    model = build_model(cfg.model, 20, 20).double()
    save_weights(tmp_path / "model.safetensors", model)
    raw = cfg.to_dict()
    raw["model"].update(zip(("alignment_head", "alignment_head_future", "alignment_head_refine"), old))
    (tmp_path / "config.json").write_text(json.dumps(raw))
    saved = read_config(tmp_path)
    assert saved.model.alignment_head == new and saved.to_dict()["model"] == cfg.to_dict()["model"]
    from safetensors.torch import load_file

    keys = set(load_file(str(tmp_path / "model.safetensors")))
    parts = {k.split(".")[0] for k in keys if k.startswith("align_")}
    assert parts == {"none": set(), "past": {"align_head"}, "future": {"align_head", "align_future"},
                     "past+refine": {"align_head", "align_refine"},
                     "future+refine": {"align_head", "align_future", "align_refine"}}[new]
    assert {"align_head.W_a.weight", "align_head.U_a.bias", "align_head.v_a.weight"} <= keys or new == "none"
    again = build_model(saved.model, 20, 20).double()
    load_weights(tmp_path / "model.safetensors", again)
    assert set(again.state_dict()) == keys
    src, mask = torch.randint(4, 20, (2, 5)), torch.ones(2, 5, dtype=torch.bool)
    tgt = torch.tensor([[2, 5, 6, 7, 8], [2, 5, 6, 0, 0]])
    head = new != "none"
    for a, b in zip(model(src, mask, tgt, alignment_head=head), again(src, mask, tgt, alignment_head=head)):
        assert torch.equal(a, b)


def test_the_saved_shift_links_translations_alignments_and_serve_by_its_row(tmp_path, capsys):
    """train.guided_alignment_shift 1 is read from the model: translate --alignment, align, serve and
    Translation.alignment link y_i by α_{i+1}; --alignment-shift and --shift still override it."""
    from rnnsearch.cli import main
    from rnnsearch.engine.align.links import attention_links, format_pharaoh, parse_pharaoh, word_attention
    from rnnsearch.engine.decode.loading import load

    links = diagonal_links(toy_config(tmp_path), tmp_path / "d.txt")
    cfg = toy_config(tmp_path, guided_alignment=str(links), guided_alignment_shift=1, max_steps=60)
    rnnsearch.train(cfg)
    model_dir = tmp_path / "run"
    translator = load(model_dir, device="cpu")
    srcs = Path(cfg.data.valid_src).read_text(encoding="utf-8").splitlines()[:12]
    tgts = Path(cfg.data.valid_tgt).read_text(encoding="utf-8").splitlines()[:12]
    out = translator.translate(srcs)
    shifted, unshifted = [t.links(shift=1) for t in out], [t.links(shift=0) for t in out]
    assert translator.link_shift(None) == 1 and [t.alignment for t in out] == shifted != unshifted
    (tmp_path / "in.txt").write_text("\n".join(srcs) + "\n", encoding="utf-8")
    base = ["translate", "--model", str(model_dir), "--input", str(tmp_path / "in.txt"), "--alignment"]
    for flags, want in (([], shifted), (["--alignment-shift", "0"], unshifted),
                        (["--alignment-shift", "1"], shifted)):
        assert main(base + flags) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [parse_pharaoh(line.split(" ||| ")[1])[0] for line in lines] == [set(w) for w in want], flags
    (tmp_path / "tgt.txt").write_text("\n".join(tgts) + "\n", encoding="utf-8")
    words = word_attention(translator, srcs, tgts)
    aligned = {}
    for flags, shift in (([], 1), (["--shift", "0"], 0)):
        assert main(["align", "--model", str(model_dir), "--src", str(tmp_path / "in.txt"), "--tgt",
                     str(tmp_path / "tgt.txt"), "--out", str(tmp_path / "links.txt")] + flags) == 0
        aligned[shift] = (tmp_path / "links.txt").read_text(encoding="utf-8").splitlines()
        assert aligned[shift] == [format_pharaoh(attention_links(w, shift=shift)) for w in words]
    assert aligned[0] != aligned[1]
    pytest.importorskip("uvicorn", reason="serve needs uvicorn (pip install -e '.[test]')")
    from serving import LiveServer

    from rnnsearch.serve import create_app

    with LiveServer(create_app(translator)) as live:
        status, _, body = live.request("/translate", {"texts": srcs, "alignment": True})
    assert status == 200 and [t["alignment"] for t in body["translations"]] == [[list(x) for x in w]
                                                                                for w in shifted]
