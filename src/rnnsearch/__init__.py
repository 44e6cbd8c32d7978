"""rnnsearch: attention-based neural machine translation as Bahdanau, Cho & Bengio (2014) built it.

    import rnnsearch
    model = rnnsearch.load("runs/multi30k")           # a model directory
    best = model.translate(["Ein Hund rennt."], beam=5)[0]
    best.text, best.score, best.attention_json()

    rnnsearch.train(rnnsearch.load_config("configs/multi30k_de_en.yaml"))
"""

from pathlib import Path

from rnnsearch.config import Config, load_config
from rnnsearch.engine.decode.translator import Translation, Translator, load
from rnnsearch.engine.train.agreement import AgreementTrainer
from rnnsearch.engine.train.guided import GuidedTrainer
from rnnsearch.engine.train.trainer import Trainer, run_config
from rnnsearch.nn.model import RNNencdec, RNNsearch, build_model

__all__ = ["Config", "load_config", "RNNsearch", "RNNencdec", "build_model", "train", "load",
           "Translator", "Translation"]
__version__ = "0.1.0"


def train(cfg: Config, resume: bool = False) -> Path:
    """Train per `cfg`, writing the model directory `cfg.model_dir`; returns its path. The loop is
    `Trainer` (engine/train/trainer.py); with train.agreement, `AgreementTrainer` trains the two directions
    together (engine/train/agreement.py); with train.guided_alignment, `GuidedTrainer` teaches the
    attention a word aligner's links (engine/train/guided.py). It is chosen here, above the modules,
    because the others build on the first.

    With `resume`, continue from the directory's last checkpoint (config taken from it).
    SIGINT or SIGTERM during training saves a checkpoint after the current update and raises
    `TrainingInterrupted` (a KeyboardInterrupt): the run is resumable and has no DONE.
    """
    t = run_config(cfg, resume).train
    trainer = AgreementTrainer if t.agreement else GuidedTrainer if t.guided_alignment else Trainer
    return trainer(cfg, resume).run()
