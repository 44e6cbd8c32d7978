"""The models one `rnnsearch serve` holds: each a language pair with its own translator and
Batcher, found by (source, target) for the LibreTranslate and DeepL APIs, by name for the
native one.

    rnnsearch serve --model de-en=runs/a --model en-zh=runs/b

A model named ``SRC-TGT`` serves that pair; a model given without a name takes its languages
from its config: the training files' language suffixes (``train.de.gz`` / ``train.en.gz``: de-en).

``source: auto`` picks among the loaded models' source languages by the share of the text's
whitespace words that each model's source vocabulary knows whole (one piece, not <unk>): a
German sentence is mostly whole words of a German vocabulary and mostly fragments of an English
one. The share, in percent, is the confidence the APIs report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnsearch.engine.data.vocab import UNK
from rnnsearch.io import DataError
from rnnsearch.serve.batching import Batcher
from rnnsearch.serve.exported import ExportedTranslator

# English names of the languages /languages lists (any other code is listed under its code)
LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian",
    "fi": "Finnish", "fr": "French", "ga": "Irish", "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian",
    "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian",
    "lv": "Latvian", "nb": "Norwegian Bokmål", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sv": "Swedish", "th": "Thai",
    "tr": "Turkish", "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}
_CODE = re.compile(r"[a-z]{2,3}")


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


@dataclass
class Served:
    """One loaded model: its name, language pair, translator, batcher and what /info says of it."""

    name: str
    source: str
    target: str
    translator: Any
    batcher: Batcher
    decode: Any  # config.DecodeConfig: the default decoding options of its requests
    info: dict


class LanguageError(Exception):
    """A request names a language (or pair) no loaded model serves; `code` is the one at fault."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.message, self.code = message, code


def parse_model_spec(spec: str) -> tuple[str | None, str]:
    """``--model de-en=runs/a`` -> ("de-en", "runs/a"); ``--model runs/a`` -> (None, "runs/a")."""
    name, sep, path = spec.partition("=")
    if not sep:
        return None, spec
    if not name or not path:
        raise DataError(f"--model {spec}: expected SRC-TGT=DIR (e.g. de-en=runs/multi30k) or DIR")
    return name, path


def _suffix(path: str | None) -> str | None:
    """The language code a corpus file name ends in: data/multi30k/train.de.gz -> de."""
    if not path:
        return None
    name = Path(path).name
    for compressed in (".gz", ".xz", ".bz2"):
        name = name.removesuffix(compressed)
    code = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return code if _CODE.fullmatch(code) and code not in ("src", "tgt", "txt") else None


def model_languages(name: str | None, cfg, model_dir: str) -> tuple[str, str]:
    """(source, target) of a model: from its name SRC-TGT, else from its config's training files."""
    if name is not None:
        source, sep, target = name.partition("-")
        if not sep or not _CODE.fullmatch(source) or not _CODE.fullmatch(target):
            raise DataError(f"--model {name}={model_dir}: the name must be SRC-TGT with language codes "
                            f"of 2 or 3 lower-case letters, e.g. de-en")
        return source, target
    src, tgt = _suffix(cfg.data.train_src), _suffix(cfg.data.train_tgt)
    if src is None or tgt is None or src == tgt:
        raise DataError(f"--model {model_dir}: cannot tell its languages from its training files "
                        f"({cfg.data.train_src or cfg.data.train_tsv}); name them: --model de-en={model_dir}")
    return src, tgt


def weight_bytes(translator) -> int:
    """Bytes of the model's parameters and buffers (quantized weights as stored); an exported
    model's (--backend onnx): its graph files'."""
    if isinstance(translator, ExportedTranslator):
        return translator.graph_bytes
    tensors = list(translator.model.parameters()) + list(translator.model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


class ModelSet:
    """The served models in the order given; the first is the default of the native API."""

    def __init__(self, models: list[Served]):
        if not models:
            raise ValueError("serve needs at least one model")
        names = [m.name for m in models]
        for m in models:
            if names.count(m.name) > 1:
                raise DataError(f"--model: two models are named {m.name}")
        self.models = models
        self.by_name = {m.name: m for m in models}

    @property
    def default(self) -> Served:
        return self.models[0]

    def sources(self) -> list[str]:
        return list(dict.fromkeys(m.source for m in self.models))

    def targets(self, source: str) -> list[str]:
        return list(dict.fromkeys(m.target for m in self.models if m.source == source))

    def languages(self) -> list[str]:
        return list(dict.fromkeys([c for m in self.models for c in (m.source, m.target)]))

    def pair(self, source: str, target: str) -> Served:
        """The model for source -> target, or LanguageError saying which side no model has."""
        if source not in self.sources():
            raise LanguageError(f"{source} is not supported", source)
        for m in self.models:
            if m.source == source and m.target == target:
                return m
        if target not in self.languages():
            raise LanguageError(f"{target} is not supported", target)
        raise LanguageError(f"{language_name(target)} ({target}) is not available as a target language "
                            f"from {language_name(source)} ({source})", target)

    def detect(self, texts: list[str], candidates: list[str] | None = None) -> list[tuple[str, float]]:
        """(language, confidence 0-100) for each candidate source language, most likely first:
        the share of the texts' words its model's source vocabulary knows whole."""
        words = [w for t in texts for w in t.split()]
        scores = []
        for code in candidates if candidates is not None else self.sources():
            translator = next(m.translator for m in self.models if m.source == code)
            known = sum(1 for w in words if _whole(translator, w))
            scores.append((code, round(100.0 * known / len(words), 1) if words else 0.0))
        return sorted(scores, key=lambda s: -s[1])  # stable: ties keep the order models were given


def _whole(translator, word: str) -> bool:
    ids = translator.source_ids(word)  # normalised (and lower-cased) as the model reads it
    return len(ids) == 1 and ids[0] != UNK
