"""The Translator: n-best results, and one normalisation for every path that tokenises a source."""

import argparse
import json
import shutil

import rnnsearch
from rnnsearch.tools.cli.attention import attention_records as _attention_records


def test_n_best_entries_of_an_empty_line_are_separate_objects(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    empty, full = model.translate(["", "w1 w2"], beam=3, n_best=3)
    assert len(empty) == 3 and len({id(t) for t in empty}) == 3
    empty[0].tokens.append("changed")
    assert empty[1].tokens == [] and empty[2].tokens == []
    assert len(full) == 3 and full[0].score >= full[1].score >= full[2].score


def test_attention_labels_are_the_pieces_force_weighs(reverse_model, tmp_path):
    """With data.lowercase the model reads "W1" as "w1": the labels must say so, as the weights do."""
    model_dir = tmp_path / "lower"
    shutil.copytree(reverse_model, model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    cfg["data"]["lowercase"] = True
    (model_dir / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "src").write_text("W1 W2 W3\n")
    (tmp_path / "tgt").write_text("W3 W2 W1\n")
    model = rnnsearch.load(model_dir, device="cpu")
    weights = model.force(["W1 W2 W3"], ["W3 W2 W1"])[0]
    assert model.labels("W1 W2 W3", "W3 W2 W1") == (["w1", "w2", "w3"], ["w3", "w2", "w1", "</s>"])
    args = argparse.Namespace(model=str(model_dir), device="cpu", input=str(tmp_path / "src"), lines=None,
                              target=str(tmp_path / "tgt"), subwords=True, beam=1)
    _, [record] = _attention_records(args)
    assert record == {"source": ["w1", "w2", "w3"], "target": ["w3", "w2", "w1", "</s>"], "weights": weights}
