"""Benchmarks of rnnsearch: speed beside JoeyNMT, OpenNMT-py and Marian, time to BLEU, quantised
decoding, where decoding's time goes, serving under load, alignment error rates, and runs of the
demo and the notebook over seeds.

Each script is a module of this package, run from the repository root with rnnsearch installed
(``pip install -e .``)::

    python -m benchmarks.NAME --help

`benchmarks.common` holds what several scripts share: the benchmark model's config, the Multi30k
corpus, the machine's description and the JSON output. Two shell scripts sit beside them:
gpu_speed.sh (and gpu_*.sh) for a GPU machine, and identity.sh, what a source tree trains and
translates, to show a refactoring byte-identical against the tree before it.
"""
