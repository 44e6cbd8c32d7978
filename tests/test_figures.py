"""The structure figure: uniform untrained attention, measured access maps."""

import pytest
import torch

from rnnsearch.tools.figures import access_map, structure_figure, untrained_attention


def test_untrained_attention_is_near_uniform():
    a = untrained_attention(seed=3)
    assert a.shape == (7, 7)
    assert torch.allclose(a.sum(-1), torch.ones(7))
    assert (a - 1 / 7).abs().max() < 0.03


def test_access_maps_show_the_bottleneck():
    encdec = access_map("rnnencdec")
    search = access_map("rnnsearch")
    # RNNencdec: only the last encoder state reaches the context, at every step
    assert (encdec[:, :-1] == 0).all() and (encdec[:, -1] > 0).all()
    # RNNsearch: every encoder state reaches every step's context
    assert (search > 1e-3).all()


def test_structure_figure_at_a_toy_budget(tmp_path):
    r = structure_figure(tmp_path, epochs=1)
    assert (tmp_path / "structure.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "structure.json").exists()
    assert r["untrained_mean"] == pytest.approx(1 / 7, abs=1e-6)
    assert len(r["trained_reverse_attention"]) == 7
