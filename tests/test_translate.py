"""The Translator: n-best results, one normalisation for every path that tokenises a source, and
the links out of every translation (translate --alignment, --replace-unk)."""

import argparse
import json
import shutil
import threading

import pytest
import torch

import rnnsearch
from rnnsearch.cli.attention import attention_records as _attention_records


def test_n_best_entries_of_an_empty_line_are_separate_objects(reverse_model):
    from rnnsearch.config import ConfigError

    model = rnnsearch.load(reverse_model, device="cpu")
    empty, full = model.translate_n_best(["", "w1 w2"], beam=3, n_best=3)
    assert len(empty) == 3 and len({id(t) for t in empty}) == 3
    empty[0].tokens.append("changed")
    assert empty[1].tokens == [] and empty[2].tokens == []
    assert len(full) == 3 and full[0].score >= full[1].score >= full[2].score
    # translate gives the best of each, the n-best list's first; more than one is translate_n_best's
    assert [t.text for t in model.translate(["", "w1 w2"], beam=3)] == ["", full[0].text]
    assert [[t.text] for t in model.translate(["w1 w2"], beam=3)] == [
        [t.text for t in n] for n in model.translate_n_best(["w1 w2"], beam=3)]
    with pytest.raises(ConfigError, match="n_best: translate gives one translation a sentence, got 3"):
        model.translate(["w1 w2"], beam=3, n_best=3)


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


# -- translate --alignment and --replace-unk ------------------------------------------------------

def word_model(tmp_path, arch: str = "rnnsearch", reverse: bool = False, unk_bias: float = 0.0):
    """A random tiny model with hand-made word vocabularies (its translations are noise: what is
    tested is the form of the output and the links' agreement with it); `unk_bias` makes <unk>
    likelier."""
    import torch

    from rnnsearch.config import config_from_dict
    from rnnsearch.engine.checkpoint import save_weights
    from rnnsearch.engine.data.vocab import UNK, WordVocab, save_tokenizers
    from rnnsearch.nn.model import build_model

    cfg = config_from_dict({"preset": "tiny", "vocab": {"kind": "word"}, "data": {"reverse_source": reverse},
                            "model": {"arch": arch, "emb": 8, "hidden": 8, "align": 8, "maxout": 4},
                            "decode": {"beam": 2}})
    model_dir = tmp_path / f"{arch}{'-reversed' if reverse else ''}-{unk_bias}"
    model_dir.mkdir()
    src = WordVocab("the cat sat on a mat".split())
    tgt = WordVocab("le chat était assis sur un tapis".split())
    save_tokenizers(model_dir, cfg.vocab, src, tgt)
    torch.manual_seed(0)
    model = build_model(cfg.model, len(src), len(tgt))
    with torch.no_grad():  # large weights: attention far from uniform, translations of a few words
        for p in model.parameters():
            p.normal_(0.0, 0.5)
        model.W_o.bias[UNK] += unk_bias
    save_weights(model_dir / "model.safetensors", model)
    cfg.save(model_dir / "config.json")
    return model_dir


LINES = ["the cat sat", "", "a mat on the cat sat", "the  dog\tsat on", "\x00"]


def _translate(capsys, model_dir, tmp_path, *flags, lines=LINES):
    from rnnsearch.cli import main

    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    code = main(["translate", "--model", str(model_dir), "--input", str(tmp_path / "in.txt"),
                 "--device", "cpu", *flags])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out.splitlines()


def _soft_groups(text: str) -> dict[int, dict[int, float]]:
    """``--alignment soft``'s j:i=w,i=w groups as {target word: {source word: weight}}."""
    out = {}
    for group in text.split():
        j, _, cells = group.partition(":")
        out[int(j)] = {int(i): float(w) for i, w in (c.split("=") for c in cells.split(",") if c)}
    return out


def test_alignment_lines_hold_the_translation_and_links_in_range(tmp_path, capsys):
    from rnnsearch.engine.align.links import parse_pharaoh

    model_dir = word_model(tmp_path)
    plain = _translate(capsys, model_dir, tmp_path)
    hard = _translate(capsys, model_dir, tmp_path, "--alignment")
    assert len(hard) == len(LINES) and all(line.count(" ||| ") == 1 for line in hard)
    assert [line.split(" ||| ")[0] for line in hard] == plain  # the translations are unchanged
    assert hard[1] == hard[4] == " ||| "  # empty lines (and one empty once cleaned): nothing either side
    for source, line in zip(LINES, hard):
        text, links = line.split(" ||| ")
        sure, _ = parse_pharaoh(links)
        assert all(0 <= i < len(source.split()) for i, _ in sure)
        assert sorted(j for _, j in sure) == list(range(len(text.split())))  # one link per target word
    assert _translate(capsys, model_dir, tmp_path, "--alignment", "hard", "--alignment-shift", "0") == hard
    shifted = _translate(capsys, model_dir, tmp_path, "--alignment", "--alignment-shift", "1")
    assert [line.split(" ||| ")[0] for line in shifted] == plain
    # a word vocabulary's pieces are its words: --subwords links the same units
    assert _translate(capsys, model_dir, tmp_path, "--alignment", "--subwords") == hard
    soft = _translate(capsys, model_dir, tmp_path, "--alignment", "soft")
    for source, line in zip(LINES, soft):
        text, groups = line.split(" ||| ")
        weights = _soft_groups(groups)
        assert sorted(weights) == list(range(len(text.split())))
        for row in weights.values():
            assert all(0 <= i < len(source.split()) for i in row)
            assert sum(row.values()) == pytest.approx(1, abs=0.01)


def test_saliency_links_are_the_saliency_of_each_output(reverse_model, tmp_path, capsys):
    """translate --links saliency: the links of each translation come from Translator.force(...,
    links="saliency") on the source and that very output (no shift), and find the reversal; the
    older --saliency [mean] spells the same."""
    from conftest import TOY

    from rnnsearch.cli import main
    from rnnsearch.engine.align.links import parse_pharaoh
    from rnnsearch.tools.toy import toy_pairs

    model = rnnsearch.load(reverse_model, device="cpu")
    sources, _ = toy_pairs(8, "reverse", seed=9, **TOY)
    plain = model.translate(sources)
    salient = model.translate(sources, links="saliency")
    assert [t.text for t in salient] == [t.text for t in plain]
    forced = model.force(sources, [t.text for t in salient], links="saliency")
    for t, rows in zip(salient, forced):
        assert t.aligned == rows
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    base = ["translate", "--model", str(reverse_model), "--input", str(tmp_path / "in.txt"), "--alignment"]
    assert main(base + ["--links", "saliency"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert main(base + ["--saliency"]) == 0
    assert capsys.readouterr().out.splitlines() == lines
    right = total = 0
    for source, line in zip(sources, lines):
        text, links = line.split(" ||| ")
        n = len(source.split())
        sure, _ = parse_pharaoh(links)
        right += sum(i == n - 1 - j for i, j in sure)
        total += len(sure)
    assert right / total > 0.8  # the reversal's anti-diagonal
    assert main(base + ["--links", "saliency", "--quantize", "int8"]) == 2
    assert "--links: saliency takes gradients" in capsys.readouterr().err
    assert main(base + ["--links", "saliency", "--saliency", "mean"]) == 2
    assert "--saliency mean is --links mean" in capsys.readouterr().err
    # --links mean: the links of the mean of the attention and saliency rows of each output
    mean = model.translate(sources, links="mean")
    for flags in (["--links", "mean"], ["--saliency", "mean"]):
        assert main(base + flags) == 0
        lines = capsys.readouterr().out.splitlines()
        got = [parse_pharaoh(line.split(" ||| ")[1])[0] for line in lines]
        assert got == [set(t.alignment) for t in mean]
    assert [t.aligned for t in mean] == model.force(sources, [t.text for t in mean], links="mean")


def test_alignment_with_n_best_links_every_hypothesis(tmp_path, capsys):
    from rnnsearch.engine.align.links import parse_pharaoh

    model_dir = word_model(tmp_path)
    plain = _translate(capsys, model_dir, tmp_path, "--n-best", "2", "--beam", "2")
    lines = _translate(capsys, model_dir, tmp_path, "--n-best", "2", "--beam", "2", "--alignment")
    assert len(lines) == 2 * len(LINES) and [line.split(" ||| ")[0] for line in lines] == plain
    for line in lines:
        index, _, rest = line.split("\t")
        text, links = rest.split(" ||| ")
        sure, _ = parse_pharaoh(links)
        assert sorted(j for _, j in sure) == list(range(len(text.split())))
        assert all(0 <= i < len(LINES[int(index)].split()) for i, _ in sure)


def test_python_api_alignment(tmp_path):
    model = rnnsearch.load(word_model(tmp_path), device="cpu")
    with_links = model.translate(LINES)
    assert [t.text for t in with_links] == [t.text for t in model.translate(LINES, attention=False)]
    for source, t in zip(LINES, with_links):
        assert t.source == source and t.pieces_are_words is True
        assert t.alignment == t.links(subwords=True)
    assert model.translate(LINES[:1], attention=False)[0].alignment is None


def _fake_decode(monkeypatch, tokens: list[int], rows: list[list[float]]):
    """Every source piece 'translated' to `tokens` with attention `rows` (reading order)."""
    from rnnsearch.engine.decode.translator import Translator
    from rnnsearch.nn.search import Hypothesis

    def decode(self, pieces, options, batch_size, graphs=True, workers=1, prefixes=None, constraints=None):
        rev = self.cfg.data.reverse_source
        attention = [row[::-1] if rev else row for row in rows]  # as the model read the source
        return [[Hypothesis(list(tokens), -1.0, -2.0, attention if options.with_attention else None)]
                * options.decode.n_best for _ in pieces]

    monkeypatch.setattr(Translator, "_decode", decode)


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed-source"])
def test_replace_unk_uses_the_linked_source_word(tmp_path, capsys, monkeypatch, reverse):
    model_dir = word_model(tmp_path, reverse=reverse)
    source = "the zebra sat on the okapi"  # zebra and okapi are outside the source vocabulary: <unk>
    # output "<unk> chat <unk>": y1 attends to zebra, y2 to "the", y3 to okapi; </s> to "sat"
    rows = [[0.05, 0.75, 0.05, 0.05, 0.05, 0.05], [0.75, 0.05, 0.05, 0.05, 0.05, 0.05],
            [0.05, 0.05, 0.05, 0.05, 0.05, 0.75], [0.05, 0.05, 0.75, 0.05, 0.05, 0.05]]
    _fake_decode(monkeypatch, [1, 5, 1], rows)
    (tmp_path / "lex.tsv").write_text("zebra\tcheval\t0.2\nzebra\tzèbre\t0.8\nthe\tle\t0.9\n")
    lex = ["--lexicon", str(tmp_path / "lex.tsv")]
    assert _translate(capsys, model_dir, tmp_path, lines=[source]) == ["<unk> chat <unk>"]
    replaced = _translate(capsys, model_dir, tmp_path, "--replace-unk", *lex, lines=[source])
    assert replaced == ["zèbre chat okapi"]  # zèbre: the table's best for zebra; okapi: copied
    assert _translate(capsys, model_dir, tmp_path, "--replace-unk", lines=[source]) == ["zebra chat okapi"]
    # shifted, y1 takes y2's row ("the": in the table) and y3 the </s> row ("sat": copied)
    assert _translate(capsys, model_dir, tmp_path, "--replace-unk", "--alignment-shift", "1", *lex,
                      lines=[source]) == ["le chat sat"]
    assert _translate(capsys, model_dir, tmp_path, "--replace-unk", *lex, "--alignment", "--n-best", "2",
                      lines=[source, ""]) == ["0\t-1.0000\tzèbre chat okapi ||| 0-1 1-0 5-2"] * 2 \
        + ["1\t0.0000\t ||| "] * 2  # an empty line's n-best: empty translations, no links
    _fake_decode(monkeypatch, [4, 5], rows[1:])  # "le chat": nothing to replace
    assert _translate(capsys, model_dir, tmp_path, "--replace-unk", *lex, lines=[source]) == ["le chat"]


def test_replace_unk_leaves_translations_without_unk_alone(tmp_path, capsys):
    model_dir = word_model(tmp_path)
    plain = _translate(capsys, model_dir, tmp_path)
    assert "<unk>" not in " ".join(plain)  # this model happens to write none
    assert _translate(capsys, model_dir, tmp_path, "--replace-unk") == plain


def test_replace_unk_copies_the_source_word_each_unk_is_linked_to(tmp_path, capsys):
    model_dir = word_model(tmp_path, unk_bias=6.0)  # every output word is <unk>
    translations = rnnsearch.load(model_dir, device="cpu").translate(LINES)
    replaced = _translate(capsys, model_dir, tmp_path, "--replace-unk")
    assert any(t.tokens for t in translations) and all(set(t.tokens) <= {"<unk>"} for t in translations)
    for source, t, line in zip(LINES, translations, replaced):
        words = line.split()
        assert len(words) == len(t.tokens) and sorted(j for _, j in t.alignment) == list(range(len(words)))
        assert all(words[j] == source.split()[i] for i, j in t.alignment)  # "dog", as given: copied


def test_alignment_flags_refuse_what_they_cannot_do(tmp_path, capsys):
    from rnnsearch.cli import main

    model_dir = word_model(tmp_path)
    (tmp_path / "in.txt").write_text("the cat\n")
    (tmp_path / "lex.tsv").write_text("cat\tchat\t1.0\ncat\tchien\n")
    base = ["translate", "--model", str(model_dir), "--input", str(tmp_path / "in.txt")]
    for flags, message in ((["--lexicon", str(tmp_path / "lex.tsv")], "give both"),
                           (["--subwords"], "--subwords chooses the units of --alignment"),
                           (["--replace-unk", "--lexicon", str(tmp_path / "lex.tsv")],
                            "lex.tsv:2: expected source_word<TAB>target_word<TAB>probability")):
        assert main(base + flags) == 2
        assert message in capsys.readouterr().err
    encdec = word_model(tmp_path, arch="rnnencdec")
    assert main(["translate", "--model", str(encdec), "--input", str(tmp_path / "in.txt"),
                 "--alignment"]) == 2
    assert "is an RNNencdec model: it has none" in capsys.readouterr().err


def test_format_html_carries_tags_to_the_aligned_words(reverse_model, tmp_path, capsys):
    """The reversal model's attention is anti-diagonal, so a tag around source word k belongs
    around target word n-1-k; attributes come through byte for byte, the output is well-formed."""
    lines = ['w1 <b>w2</b> w3 w4', '<a href="x?a=1&amp;b=2" class=\'c\'>w5</a> w6 w7', 'w7 w8 w9<br/>', "",
             "no tags here w1 w2", "<i>unclosed w3 w4"]
    model = rnnsearch.load(reverse_model, device="cpu")
    # sentences of the lengths it learned (3-7 words): a 2-word one is outside the task
    plain = [t.text for t in model.translate(["w1 w2 w3 w4", "w5 w6 w7", "w7 w8 w9"], beam=3)]
    assert plain == ["w4 w3 w2 w1", "w7 w6 w5", "w9 w8 w7"]  # the task learned: reversal
    out = _translate(capsys, reverse_model, tmp_path, "--format", "html", "--beam", "3", lines=lines)
    assert out[0] == "w4 w3 <b>w2</b> w1"
    assert out[1] == 'w7 w6 <a href="x?a=1&amp;b=2" class=\'c\'>w5</a>'
    # a point tag comes back once, after a word: which one follows the links (seeds differ)
    assert out[2].replace(" ", "") in ("w9<br/>w8w7", "w9w8<br/>w7", "w9w8w7<br/>")
    assert out[3] == ""
    assert out[5].startswith("<i>") and out[5].endswith("</i>")  # closed at the end of the line
    assert _translate(capsys, reverse_model, tmp_path, "--format", "html", "--beam", "3",
                      lines=["w1 w2 w3"]) == [model.translate(["w1 w2 w3"], beam=3)[0].text]
    from rnnsearch.cli import main

    (tmp_path / "one.txt").write_text("<b>w1</b>\n")
    assert main(["translate", "--model", str(reverse_model), "--input", str(tmp_path / "one.txt"),
                 "--format", "html", "--n-best", "2", "--beam", "2"]) == 2
    assert "does not combine" in capsys.readouterr().err


def test_a_bad_decoding_option_is_named_as_its_caller_spells_it(reverse_model, tmp_path, capsys):
    """Every decoding option goes through config.decode_options: one check, whose error names the
    option as the caller gave it (Python keyword, CLI flag, config key; serve's field: test_serve)."""
    from rnnsearch.cli import main
    from rnnsearch.config import ConfigError, config_from_dict

    model = rnnsearch.load(reverse_model, device="cpu")
    for kwargs, message in (({"beam": 0}, "beam: must be in 1..256, got 0"),
                            ({"beam": 257}, "beam: must be in 1..256, got 257"),
                            ({"beam": "5"}, "beam: expected int, got '5'"),
                            ({"beam": 2, "n_best": 3}, "n_best: must be in 1..beam (2), got 3"),
                            ({"alpha": -0.5}, "alpha: must be >= 0"),
                            ({"max_len_ratio": 0}, "max_len_ratio: must be positive"),
                            ({"batch_size": 0}, "batch_size: must be >= 1, got 0"),
                            ({"max_source_len": 0}, "max_source_len: must be >= 1"),
                            ({"precision": "fp16"}, "precision: expected one of 'auto'"),
                            ({"links": "both"}, "links: expected 'attention' | 'head' | 'saliency' | 'mean'"),
                            ({"links": "head"}, "links: 'head' reads the alignment head, and"),
                            ({"saliency": True}, "saliency: not a decoding option (known: beam,")):
        with pytest.raises(ConfigError) as caught:
            model.translate(["w1 w2"], **kwargs)
        assert message in str(caught.value)
    (tmp_path / "in.txt").write_text("w1 w2\n")
    base = ["translate", "--model", str(reverse_model), "--input", str(tmp_path / "in.txt")]
    for flags, message in ((["--beam", "0"], "--beam: must be in 1..256, got 0"),
                           (["--beam", "3", "--n-best", "4"], "--n-best: must be in 1..beam (3), got 4"),
                           (["--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
                           (["--links", "head"], "--links: 'head' reads the alignment head")):
        assert main(base + flags) == 2
        assert message in capsys.readouterr().err
    for override, message in (("decode.beam=0", "decode.beam: must be in 1..256, got 0"),
                              ("decode.alpha=-1", "decode.alpha: must be >= 0"),
                              ("decode.batch_size=0", "decode.batch_size: must be >= 1"),
                              ("decode.links=both", "decode.links: expected 'attention' | 'head'")):
        with pytest.raises(ConfigError) as caught:
            config_from_dict({}, [override], source="run.yaml")
        assert f"run.yaml: {message}" in str(caught.value)
    # a model's own decode section is the default of every caller, checked as given
    assert model.options(beam=3).n_best == 1 and model.options().beam == model.cfg.decode.beam


def test_the_links_option_picks_the_rows_and_the_default_is_the_attention_without_a_head(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    assert model.link_rows(None) == "attention" and model.link_rows("mean") == "mean"
    plain = model.translate(["w1 w2 w3"])[0]
    assert plain.aligned is None
    assert plain.alignment == model.translate(["w1 w2 w3"], links="attention")[0].alignment
    salient = model.translate(["w1 w2 w3"], links="saliency")[0]
    assert salient.aligned == model.force(["w1 w2 w3"], [salient.text], links="saliency")[0]


@pytest.mark.parametrize("beam", [1, 3])
def test_workers_give_the_same_translations_and_restore_the_thread_count(reverse_model, monkeypatch, beam):
    """decode.workers: the length-sorted batches dealt out to searches in threads of their own,
    each running its operations on one thread; the translations are the one search's."""
    from rnnsearch.engine.decode import translator as tr

    model = rnnsearch.load(reverse_model, device="cpu")
    lines = [" ".join(f"w{(i * 7 + j) % 9 + 1}" for j in range(1 + i % 6)) for i in range(23)] + [""]
    one = model.translate(lines, beam=beam, batch_size=4, workers=1)
    seen = []  # (thread, its torch thread count) of every search
    search_stream = tr.search_stream

    def watched(*args, **kwargs):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return search_stream(*args, **kwargs)

    monkeypatch.setattr(tr, "search_stream", watched)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two = model.translate(lines, beam=beam, batch_size=4, workers=2)
        assert torch.get_num_threads() == 2  # the caller's count, set back
        assert model.workers(0) == 2  # decode.workers 0: one per thread
    finally:
        torch.set_num_threads(threads)
    assert len(seen) == 2 and all(name.startswith("rnnsearch-search") and n == 1 for name, n in seen)
    assert [t.text for t in two] == [t.text for t in one]
    assert [t.score for t in two] == pytest.approx([t.score for t in one], abs=1e-5)
    flat = lambda t: [x for row in t.attention for x in row]  # noqa: E731
    for a, b in zip(two, one):
        assert flat(a) == pytest.approx(flat(b), abs=1e-5)
    few = model.translate(lines[:3], beam=beam, batch_size=64, workers=2)  # fewer than a batch: split
    assert [t.text for t in few] == [t.text for t in one[:3]]
    assert len(seen) == 4  # the three sentences shared by two searches too


def test_workers_out_of_range_is_named(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    from rnnsearch.config import ConfigError

    with pytest.raises(ConfigError, match="workers: must be >= 0"):
        model.translate(["w1"], workers=-1)


def test_workers_with_nothing_or_only_empty_lines_to_translate(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    assert model.translate([], workers=2) == []
    assert [t.text for t in model.translate(["", ""], beam=1, workers=2)] == ["", ""]
