"""The ``rnnsearch`` command line: one module per group of commands, each command's
arguments next to its handler (``add_NAME(sub)`` then ``cmd_NAME(args)``).

    train.py      train, average, params, quickstart
    translate.py  translate, evaluate, shortlist
    score.py      score
    attention.py  plot-attention, explore, align
    demo.py       demo, figure, experiment
    data.py       data (get, list, split, prepare, align)
    serve.py      serve
    export.py     export (ONNX)
    common.py     what several commands share: input lines, decoding flags, attention as text
"""

from __future__ import annotations

import argparse
import logging
import sys

from rnnsearch.cli import attention, data, demo, export, score, serve, train, translate
from rnnsearch.config import ConfigError
from rnnsearch.engine.checkpoint import CheckpointError
from rnnsearch.io import DataError

log = logging.getLogger("rnnsearch")

# In the order `rnnsearch --help` lists them.
COMMANDS = (train.add_train, translate.add_translate, translate.add_evaluate, score.add_score,
            attention.add_attention_views,
            attention.add_align, train.add_average, train.add_params, demo.add_demo, demo.add_figure,
            demo.add_experiment, data.add_data, serve.add_serve, export.add_export, translate.add_shortlist,
            train.add_quickstart)


class _TqdmHandler(logging.Handler):
    """Log lines that do not tear through an active progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        tqdm.write(self.format(record), file=sys.stderr)


def _setup_logging(verbose: bool = False) -> None:
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("rnnsearch: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every subcommand and its flags."""
    parser = argparse.ArgumentParser(prog="rnnsearch", description="The ``rnnsearch`` command line.")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        args.func(args)
    except (ConfigError, DataError, CheckpointError, FloatingPointError) as e:
        print(f"rnnsearch: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        # a training run stopped by SIGINT/SIGTERM saved a checkpoint and says how to resume
        # (engine.train.launch.TrainingInterrupted); the exit status is the shell's 128 + signal number
        signum = getattr(e, "signum", None)
        print(f"rnnsearch: {e if signum else 'interrupted'}", file=sys.stderr)
        return 128 + (signum or 2)
    except BrokenPipeError:
        return 0
    return 0
