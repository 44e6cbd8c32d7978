"""WMT'14 En-Fr at the paper's scale: the two configs, their corpus folder and docs/wmt14.md."""

import gzip
import json
import shlex
from pathlib import Path

import pytest
import yaml
from test_docs import fenced_commands

from rnnsearch.cli import build_parser, main
from rnnsearch.config import load_config
from rnnsearch.tools.download import fetch_hint

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "configs" / "wmt14_en_fr_paper.yaml"
FAST = ROOT / "configs" / "wmt14_en_fr.yaml"


@pytest.mark.parametrize("path", [PAPER, FAST], ids=lambda p: p.name)
def test_config_loads_and_reads_the_corpus_folder(path):
    cfg = load_config(path)  # an unknown key or a bad value raises ConfigError
    raw = yaml.safe_load(path.read_text())
    for section, keys in raw.items():  # every key written is one the config tree has, none ignored
        if isinstance(keys, dict):
            assert set(keys) <= set(getattr(cfg, section).__dict__), section
    d = cfg.data
    assert (d.train_src, d.train_tgt) == ("data/wmt14_en_fr/train.en.gz", "data/wmt14_en_fr/train.fr.gz")
    assert (d.valid_src, d.valid_tgt) == ("data/wmt14_en_fr/dev.en", "data/wmt14_en_fr/dev.fr")
    assert fetch_hint(d.train_src) == "rnnsearch data get wmt14-en-fr --allow-unpinned"
    assert d.bleu_tokenize == "none"  # the corpus is tokenised: BLEU as multi-bleu.perl computed it
    m = cfg.model
    assert (m.arch, m.emb, m.hidden, m.align, m.maxout) == ("rnnsearch", 620, 1000, 1000, 500)
    assert cfg.decode.beam == 12


def test_paper_config_is_appendix_a_and_b():
    cfg = load_config(PAPER)
    t = cfg.train
    assert (t.optimizer, t.lr, t.rho, t.eps, t.clip_norm) == ("adadelta", 1.0, 0.95, 1e-6, 1.0)
    assert (t.batch_size, t.batch_by, t.batching, t.sort_k) == (80, "sentences", "paper", 20)
    assert (cfg.data.max_len, cfg.data.lowercase, t.label_smoothing, t.precision) == (50, False, 0.0, "fp32")
    assert (cfg.model.init, cfg.model.gru, cfg.model.readout) == ("paper", "paper", "prev")
    assert cfg.model.dropout_emb == cfg.model.dropout_hidden == cfg.model.dropout_readout == 0.0
    assert (cfg.vocab.kind, cfg.vocab.joint) == ("word", False)
    from rnnsearch.engine.data.vocab import SPECIALS, WordVocab

    vocab = WordVocab.build([" ".join(f"w{i}" for i in range(40_000))], cfg.vocab.size)
    assert len(vocab) - len(SPECIALS) == 29_998  # GroundHog's 30,000 ids: 29,998 words, UNK, </s>


def test_fast_config_is_the_gpu_recipe():
    cfg = load_config(FAST)
    assert (cfg.vocab.kind, cfg.vocab.size, cfg.vocab.joint) == ("bpe", 32000, True)
    assert (cfg.train.optimizer, cfg.train.precision, cfg.train.batch_by) == ("adam", "bf16", "tokens")


def test_wmt14_doc_commands_parse_and_name_files_that_exist():
    parser = build_parser()
    commands = fenced_commands(ROOT / "docs" / "wmt14.md")
    assert any("--no-unk" in c for c in commands) and any("data get wmt14-en-fr " in c for c in commands)
    for command in commands:
        argv = shlex.split(command)[1:]
        parser.parse_args(argv)
        for arg in argv:
            if arg.startswith(("configs/", "docs/")):
                assert (ROOT / arg).exists(), command


SMALL = ["--set", "model.emb=16", "--set", "model.hidden=16", "--set", "model.align=16", "--set",
         "model.maxout=8", "--set", "train.max_steps=2", "--set", "train.max_epochs=1", "--set",
         "train.progress=false", "--set", "train.threads=1", "--set", "train.tensorboard=false", "--set",
         "train.valid_every=0", "--set", "train.save_every_minutes=0", "--set", "data.valid_bleu_sentences=4"]


def test_both_configs_train_on_the_corpus_folder_as_written(tmp_path, monkeypatch, capsys):
    """`rnnsearch data get wmt14-en-fr` writes data/wmt14_en_fr/ (here a tiny stand-in); both configs
    then train from it with every path as shipped, and evaluate --no-unk scores the paper model."""
    folder = tmp_path / "data" / "wmt14_en_fr"
    folder.mkdir(parents=True)
    words = {"en": "the cat sat on a mat with dog", "fr": "le chat était assis sur un tapis avec chien"}
    for lang, vocab in words.items():
        w = vocab.split()
        lines = [" ".join(w[(i + k) % len(w)] for k in range(3 + i % 4)) for i in range(60)]
        (folder / f"train.{lang}.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
        for split in ("dev", "test"):
            (folder / f"{split}.{lang}").write_text("\n".join(lines[:6] + [f"{w[0]} zzz"]) + "\n")
    monkeypatch.chdir(tmp_path)
    # 13: the 4 reserved entries and all 9 French words
    assert main(["train", str(PAPER), *SMALL, "--set", "vocab.size=13", "--set", "train.batch_size=8"]) == 0
    assert main(["train", str(FAST), *SMALL, "--set", "vocab.size=40", "--set", "train.batch_size=64"]) == 0
    for run in ("wmt14_en_fr_paper", "wmt14_en_fr"):
        assert (tmp_path / "runs" / run / "model.safetensors").exists()
    capsys.readouterr()
    assert main(["evaluate", "--model", "runs/wmt14_en_fr_paper", "--src", "data/wmt14_en_fr/test.en",
                 "--ref", "data/wmt14_en_fr/test.fr", "--beam", "2", "--no-unk"]) == 0
    out = capsys.readouterr()
    entry = json.loads(out.out)
    assert entry["no_unk"] is True and entry["sentences_total"] == 7
    assert entry["sentences"] == 6  # the last line's "zzz" is in no vocabulary
    assert "6 of 7 sentences have no unknown word" in out.err
    assert entry["bleu_signature"].split("|")[3] == "tok:none"
