"""Lexical shortlists (engine/accel/shortlist.py): which target ids a sentence may produce, search over
their union, what they are built from, and the file's checks."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rnnsearch.cli import main
from rnnsearch.engine.accel.shortlist import Shortlist, build_shortlist, load_shortlist
from rnnsearch.engine.data.vocab import BOS, EOS, PAD, UNK
from rnnsearch.engine.decode.loading import load
from rnnsearch.engine.decode.translator import Translator
from rnnsearch.io import DataError


def listed(model: Translator, shortlist: Shortlist) -> Translator:
    """`model` decoding over `shortlist`."""
    return Translator(model.cfg, model.model, model.src_tok, model.tgt_tok, model.device, shortlist=shortlist)


def test_allowed_is_frequent_plus_each_source_ids_translations_plus_eos_and_unk():
    table = np.array([[-1, -1], [-1, -1], [-1, -1], [-1, -1], [7, 8], [9, -1], [5, 6]], dtype=np.int32)
    shortlist = Shortlist(np.array([10], dtype=np.int32), table, {})
    src = torch.tensor([[4, 5, PAD], [6, PAD, PAD]])
    allowed = shortlist.allowed(src, src != PAD, tgt_vocab=12)
    assert allowed[0].nonzero().squeeze(1).tolist() == sorted([UNK, EOS, 7, 8, 9, 10])
    assert allowed[1].nonzero().squeeze(1).tolist() == sorted([UNK, EOS, 5, 6, 10])  # padding adds nothing


def _ids(translations, model):
    return [model.tgt_tok.encode(t.text) for t in translations]


@pytest.mark.parametrize("beam", [1, 3])  # greedy search takes a path of its own
def test_a_shortlist_of_every_id_translates_exactly_as_the_full_output_layer(reverse_model, tmp_path, beam):
    model = load(reverse_model, device="cpu")
    sources = Path(model.cfg.data.valid_src).read_text(encoding="utf-8").splitlines()[:30]
    full = model.translate_n_best(sources, beam=beam, n_best=min(2, beam))
    every = np.arange(len(model.tgt_tok), dtype=np.int32)  # <s> and <pad> included: the same softmax
    Shortlist(every, np.full((len(model.src_tok), 1), -1, np.int32), {}).save(tmp_path / "all.npz")
    over = listed(model, Shortlist(every, np.full((len(model.src_tok), 1), -1, np.int32), {}))
    shortlisted = over.translate_n_best(sources, beam=beam, n_best=min(2, beam))
    for a, b in zip(full, shortlisted, strict=True):
        assert [t.text for t in a] == [t.text for t in b]
        assert [t.score for t in a] == pytest.approx([t.score for t in b], abs=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_search_produces_only_what_the_shortlist_allows(reverse_model, beam):
    model = load(reverse_model, device="cpu")
    sources = Path(model.cfg.data.valid_src).read_text(encoding="utf-8").splitlines()[:40]
    words = sorted({w for s in sources for w in s.split()})
    banned = model.tgt_tok.encode(words[0])[0]  # a word many references need
    table = np.full((len(model.src_tok), 1), -1, np.int32)
    frequent = np.array([i for i in range(4, len(model.tgt_tok)) if i != banned], dtype=np.int32)
    model = listed(model, Shortlist(frequent, table, {}))
    for src, out in zip(sources, _ids(model.translate(sources, beam=beam), model)):
        assert banned not in out
        assert len(out) <= 2 * len(src.split()) + 10  # </s> still reachable
    # a one-id shortlist beside </s> and <unk>: fewer ids than the beam is wide
    model = listed(model, Shortlist(np.array([5], np.int32), table, {}))
    assert all(set(ids) <= {5, UNK} for ids in _ids(model.translate(sources[:5], beam=beam), model))


def test_built_from_cooccurrence_it_covers_the_reversal_task(reverse_model):
    model = load(reverse_model, device="cpu")
    shortlist = build_shortlist(reverse_model, frequent=0, per_source=1, use_links=False)
    assert shortlist.meta["source"] == "cooccurrence"
    # in the reversal task a source word's translation is itself: the Dice coefficient finds it
    for word in ("w1", "w5", "w9"):
        assert shortlist.table[model.src_tok.encode(word)[0], 0] == model.tgt_tok.encode(word)[0]
    srcs = Path(model.cfg.data.valid_src).read_text(encoding="utf-8").splitlines()
    refs = Path(model.cfg.data.valid_tgt).read_text(encoding="utf-8").splitlines()
    src = torch.tensor([model.source_ids(s) + [PAD] * (9 - len(s.split())) for s in srcs])
    allowed = shortlist.allowed(src, src != PAD, len(model.tgt_tok))
    for k, ref in enumerate(refs):  # every reference word is on its sentence's list
        assert all(allowed[k, t] for t in model.target_ids(ref))
    assert not allowed[:, BOS].any() and allowed[:, EOS].all()


def test_built_from_token_links_when_the_corpus_is_aligned(reverse_model, tmp_path):
    pytest.importorskip("eflomal", reason="token links come from `rnnsearch data align` (eflomal)")
    from rnnsearch.engine.align.eflomal import align_config
    from rnnsearch.engine.checkpoint import read_config

    model_dir = tmp_path / "model"
    shutil.copytree(reverse_model, model_dir)
    cfg = read_config(model_dir)
    cfg.model_dir = str(model_dir)
    cfg.save(model_dir / "config.json")
    align_config(cfg)
    shortlist = build_shortlist(model_dir, frequent=2, per_source=1)
    assert shortlist.meta["source"] == "links" and len(shortlist.frequent) == 2
    translator = load(model_dir, device="cpu")
    for word in ("w2", "w7"):
        assert shortlist.table[translator.src_tok.encode(word)[0], 0] == translator.tgt_tok.encode(word)[0]


def test_the_command_writes_it_and_decoding_reads_it_or_refuses_others(reverse_model, tmp_path, capsys):
    out = tmp_path / "short.npz"
    assert main(["shortlist", "build", "--model", str(reverse_model), "--out", str(out), "--frequent", "3",
                 "--cooccurrence"]) == 0
    assert str(out) in capsys.readouterr().out
    loaded = load(reverse_model, device="cpu")
    shortlist = load_shortlist(out, Path(reverse_model), len(loaded.src_tok), loaded.cfg.vocab)
    assert len(shortlist.frequent) == 3 and shortlist.meta["per_source"] == 20
    model = load(reverse_model, device="cpu", shortlist=out)
    assert model.translate(["w1 w2 w3"], beam=3)[0].text == "w3 w2 w1"
    other = tmp_path / "other"
    shutil.copytree(reverse_model, other)
    words = (other / "tgt.vocab.txt").read_text(encoding="utf-8").splitlines()
    words[-1], words[-2] = words[-2], words[-1]  # the same size, another vocabulary
    (other / "tgt.vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="built for other tokenizers"):
        load(other, device="cpu", shortlist=out)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a shortlist"):
        load(reverse_model, device="cpu", shortlist=tmp_path / "junk.npz")
    with pytest.raises(DataError, match="no such shortlist"):
        load(reverse_model, device="cpu", shortlist=tmp_path / "missing.npz")
    assert main(["translate", "--model", str(reverse_model), "--shortlist", str(tmp_path / "missing.npz"),
                 "--input", str(out)]) == 2
    assert "no such shortlist" in capsys.readouterr().err


def test_auto_builds_and_keeps_it_in_the_model_directory_and_int8_decodes_over_it(reverse_model, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(reverse_model, model_dir)
    model = load(model_dir, device="cpu", shortlist="auto")
    assert (model_dir / "shortlist.npz").exists()
    assert model.translate(["w4 w5 w6"], beam=3)[0].text == "w6 w5 w4"
    int8 = load(model_dir, device="cpu", quantize="int8", shortlist="auto")
    assert int8.translate(["w4 w5 w6"], beam=3)[0].text == "w6 w5 w4"
    meta = json.loads(json.dumps(model.shortlist.meta))
    assert meta["source"] in ("links", "cooccurrence") and meta["frequent"] == 1000
