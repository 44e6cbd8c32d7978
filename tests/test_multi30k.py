"""The shipped Multi30k config is valid and its data path works on the real corpus."""

from pathlib import Path

from rnnsearch.config import load_config
from rnnsearch.engine.data.parallel import ParallelData, read_parallel
from rnnsearch.engine.data.vocab import build_tokenizers

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "multi30k_de_en.yaml"


def test_config_loads():
    cfg = load_config(CONFIG)
    assert cfg.model.arch == "rnnsearch" and cfg.decode.beam == 5


def test_real_corpus_reads_and_encodes(shared_data, tmp_path):
    d = shared_data / "multi30k"
    src, tgt = read_parallel(d / "val.de.gz", d / "val.en.gz")
    assert len(src) == len(tgt) == 1014
    cfg = load_config(CONFIG, ["vocab.size=500"])
    s_tok, t_tok = build_tokenizers(cfg.vocab, src, tgt)
    data = ParallelData.encode(src, tgt, s_tok, t_tok, cfg.data.max_len)
    assert len(data) + data.dropped_blank + data.dropped_long == 1014
    assert t_tok.decode(data.examples[0].tgt) == tgt[0]
