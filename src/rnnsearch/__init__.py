"""rnnsearch: attention-based neural machine translation as Bahdanau, Cho & Bengio (2014) built it.

    import rnnsearch
    model = rnnsearch.load("runs/multi30k")           # a model directory
    best = model.translate(["Ein Hund rennt."], beam=5)[0]
    best.text, best.score, best.attention_json()

    rnnsearch.train(rnnsearch.load_config("configs/multi30k_de_en.yaml"))
"""

from rnnsearch.config import Config, load_config
from rnnsearch.engine.decode.loading import load
from rnnsearch.engine.decode.translator import Translation, Translator
from rnnsearch.engine.train.trainer import Trainer, train
from rnnsearch.nn.model import RNNencdec, RNNsearch, build_model

__all__ = ["Config", "load_config", "RNNsearch", "RNNencdec", "build_model", "train", "Trainer", "load",
           "Translator", "Translation"]
__version__ = "0.1.0"
