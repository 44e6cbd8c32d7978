"""Configuration: YAML loading, validation errors a user can act on, overrides, presets."""

import json

import pytest

from rnnsearch.config import PRESETS, Config, ConfigError, config_from_dict, load_config


def write(tmp_path, text, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file():
    assert load_config(None) == Config()


def test_load_yaml_with_nested_sections(tmp_path):
    path = write(tmp_path, """
model_dir: runs/x
data:
  train_src: a.de
  train_tgt: a.en.gz
  max_len: 30
  reverse_source: true
vocab:
  kind: word
  size: 500
  joint: true
model:
  arch: rnnencdec
  hidden: 64
  dropout_emb: 0.1
train:
  lr: 2          # an int where a float is expected is fine
  batching: bucket
  batch_by: tokens
decode:
  beam: 3
""")
    cfg = load_config(path)
    assert cfg.model_dir == "runs/x"
    assert cfg.data.train_src == "a.de" and cfg.data.train_tgt == "a.en.gz"
    assert cfg.data.max_len == 30 and cfg.data.reverse_source is True
    assert cfg.vocab.kind == "word" and cfg.vocab.size == 500 and cfg.vocab.joint is True
    assert cfg.model.arch == "rnnencdec" and cfg.model.hidden == 64 and cfg.model.dropout_emb == 0.1
    assert cfg.train.lr == 2.0 and isinstance(cfg.train.lr, float)
    assert cfg.train.batching == "bucket" and cfg.train.batch_by == "tokens"
    assert cfg.decode.beam == 3
    # untouched keys keep their defaults
    assert cfg.model.emb == Config().model.emb
    assert cfg.train.optimizer == Config().train.optimizer


def test_json_config_file(tmp_path):
    path = write(tmp_path, json.dumps({"model": {"hidden": 12}, "train": {"lr": 0.5}}), "cfg.json")
    cfg = load_config(path)
    assert cfg.model.hidden == 12 and cfg.train.lr == 0.5


def test_empty_file_gives_defaults(tmp_path):
    assert load_config(write(tmp_path, "# nothing yet\n")) == Config()


def test_repo_config_loads():
    from pathlib import Path

    paths = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))
    assert len(paths) >= 3  # the shipped configs are there to check
    for path in paths:
        load_config(path)


@pytest.mark.parametrize("text, key, suggestion", [
    ("model:\n  hiden: 10\n", "model.hiden", "hidden"),
    ("modle:\n  hidden: 10\n", "modle", "model"),
    ("train:\n  learning_rat: 0.1\n  lr: 0.1\n", "train.learning_rat", None),
    ("train:\n  bach_size: 10\n", "train.bach_size", "batch_size"),
])
def test_unknown_key_names_file_and_key_with_suggestion(tmp_path, text, key, suggestion):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg
    assert f"'{key}'" in msg
    if suggestion:
        assert f"did you mean '{suggestion}'" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("text, key", [
    ('model:\n  hidden: "big"\n', "model.hidden"),
    ("model:\n  hidden: 1.5\n", "model.hidden"),
    ("model:\n  hidden: true\n", "model.hidden"),
    ("train:\n  lr: fast\n", "train.lr"),
    ('data:\n  reverse_source: "true"\n', "data.reverse_source"),
    ("data:\n  reverse_source: 1\n", "data.reverse_source"),
    ("data:\n  train_src: 5\n  train_tgt: b\n", "data.train_src"),
    ("model: 5\n", "model"),
])
def test_wrong_type_names_file_and_key(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg and key in msg
    assert "\n" not in msg


def test_bad_literal_lists_the_choices(tmp_path):
    path = write(tmp_path, "model:\n  score: cosine\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert "model.score" in msg and "cosine" in msg
    for choice in ("additive", "dot", "general", "scaled_dot"):
        assert choice in msg
    with pytest.raises(ConfigError, match="sentences.*tokens"):
        load_config(None, ["train.batch_by=words"])
    assert load_config(None, ["train.valid_metric=chrf"]).train.valid_metric == "chrf"
    with pytest.raises(ConfigError, match="bleu.*chrf.*loss"):
        load_config(None, ["train.valid_metric=ter"])


@pytest.mark.parametrize("override", [
    "model.hidden=0", "model.dropout_emb=1.0", "vocab.size=2", "train.lr=0", "decode.beam=0",
    "decode.n_best=9", "train.device=gpu", "data.max_len=0", "train.batch_size=-1",
    "data.bleu_tokenize=chinese",
])
def test_out_of_range_values_are_rejected(override):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, [override])


def test_train_src_without_train_tgt_is_rejected():
    with pytest.raises(ConfigError, match="train_tgt"):
        load_config(None, ["data.train_src=a.de"])


def test_overrides_are_yaml_scalars(tmp_path):
    path = write(tmp_path, "model:\n  hidden: 100\n")
    cfg = load_config(path, ["model.hidden=16", "train.lr=0.25", "data.reverse_source=true",
                             "vocab.kind=word", "model_dir=out/dir", "train.device=cuda:1"])
    assert cfg.model.hidden == 16
    assert cfg.train.lr == 0.25
    assert cfg.data.reverse_source is True
    assert cfg.vocab.kind == "word"
    assert cfg.model_dir == "out/dir"
    assert cfg.train.device == "cuda:1"


def test_override_scientific_notation_float():
    # `--set train.lr=1e-3` is how people write learning rates.
    cfg = load_config(None, ["train.lr=1e-3", "train.min_lr=2e-5", "train.eps=1.0e-8"])
    assert cfg.train.lr == pytest.approx(1e-3)
    assert cfg.train.min_lr == pytest.approx(2e-5)
    assert cfg.train.eps == pytest.approx(1e-8)


def test_yaml_file_scientific_notation_float(tmp_path):
    cfg = load_config(write(tmp_path, "train:\n  lr: 1e-3\n  eps: 1e-6\n"))
    assert cfg.train.lr == pytest.approx(1e-3)
    assert cfg.train.eps == pytest.approx(1e-6)


def test_override_errors(tmp_path):
    with pytest.raises(ConfigError, match="model.hidden"):
        load_config(None, ["model.hidden=big"])
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(None, ["model.hidden"])
    with pytest.raises(ConfigError, match="model.hiddn.*did you mean 'hidden'"):
        load_config(None, ["model.hiddn=3"])


def test_overrides_win_over_the_file(tmp_path):
    path = write(tmp_path, "model:\n  hidden: 100\n  emb: 50\n")
    cfg = load_config(path, ["model.hidden=16"])
    assert cfg.model.hidden == 16 and cfg.model.emb == 50


def test_config_from_dict_does_not_mutate_its_input():
    raw = {"model": {"hidden": 100}}
    config_from_dict(raw, ["model.hidden=16"])
    assert raw == {"model": {"hidden": 100}}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_apply(tmp_path, name):
    cfg = load_config(write(tmp_path, f"preset: {name}\n"))
    assert cfg.preset == name
    for section, values in PRESETS[name].items():
        for key, value in values.items():
            assert getattr(getattr(cfg, section), key) == value, f"{section}.{key}"


def test_tiny_and_paper_presets():
    tiny = load_config(None, ["preset=tiny"])
    assert tiny.model.hidden == 32 and tiny.vocab.kind == "word"
    paper = load_config(None, ["preset=paper"])
    assert ((paper.model.emb, paper.model.hidden, paper.model.align, paper.model.maxout)
            == (620, 1000, 1000, 500))
    assert paper.vocab.size == 30000 and paper.train.batch_size == 80 and paper.train.optimizer == "adadelta"


def test_preset_values_can_be_overridden(tmp_path):
    path = write(tmp_path, "preset: tiny\nmodel:\n  hidden: 48\ntrain:\n  batch_size: 7\n")
    cfg = load_config(path, ["model.emb=20"])
    assert cfg.model.hidden == 48  # file beats preset
    assert cfg.model.emb == 20  # --set beats preset
    assert cfg.train.batch_size == 7
    assert cfg.model.align == PRESETS["tiny"]["model"]["align"]  # rest of the preset still applies
    assert cfg.train.optimizer == PRESETS["tiny"]["train"]["optimizer"]
    # the preset itself may come from --set
    cfg = load_config(write(tmp_path, "model:\n  hidden: 48\n", "b.yaml"), ["preset=tiny"])
    assert cfg.model.hidden == 48 and cfg.model.emb == PRESETS["tiny"]["model"]["emb"]


def test_unknown_preset(tmp_path):
    path = write(tmp_path, "preset: huge\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg and "huge" in msg and "tiny" in msg and "paper" in msg


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "model:\n  hidden: 10\n  emb: [1, 2\ntrain:\n  lr: 1\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:")
    line = int(msg[len(str(path)) + 1:].split(":")[0])
    assert 3 <= line <= 4
    assert "YAML" in msg


def test_invalid_yaml_tab_indent(tmp_path):
    path = write(tmp_path, "model:\n\themb: 10\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2: "):
        load_config(path)


@pytest.mark.parametrize("text", ["- model\n- train\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(path) in str(e.value) and "mapping" in str(e.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.yaml")


def test_save_and_reload_round_trip(tmp_path):
    cfg = load_config(None, ["preset=tiny", "model.hidden=16", "train.lr=0.002", "data.reverse_source=true",
                             "data.train_tsv=train.tsv", "vocab.character_coverage=0.9995",
                             "model.score=general", "decode.alpha=0.6"])
    path = tmp_path / "model" / "config.json"
    cfg.save(path)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["model"]["hidden"] == 16
    again = config_from_dict(raw, source=str(path))
    assert again == cfg
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temporary files left


def test_saved_config_json_loads_with_load_config(tmp_path):
    # load_config reads "YAML/JSON" files, so a model directory's config.json must load back.
    cfg = Config()
    path = tmp_path / "config.json"
    cfg.save(path)
    assert load_config(path) == cfg


def test_no_training_limit_at_all_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="train.max_epochs: 0 with no train.max_steps or train.max_minutes"):
        load_config(write(tmp_path, "train:\n  max_epochs: 0\n"))
    for limit in ("max_steps: 10", "max_minutes: 0.5", "max_epochs: 1"):
        load_config(write(tmp_path, f"train:\n  max_epochs: 0\n  {limit}\n"))
