"""Regenerates the figures of docs/guide.md by running the guide's own commands.

    python docs/make_figures.py --demo rnnsearch-demo/model --tatoeba runs/tatoeba_en_zh

needs the two trained models (`rnnsearch demo`; the Tatoeba commands of the guide's stop 10) and
writes docs/figures/guide/, and the structure figure to docs/figures/structure.png (one copy,
which docs/guide.md and docs/alignment.md both show). Every command below appears in docs/guide.md
with the default paths (tests/test_docs.py checks that, and runs this script on tiny models), so
what the guide tells a reader to type is what made its figures. The experiment plots the guide
shows are made by `rnnsearch experiment ...` and live in docs/experiments/.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# {demo}, {tatoeba}: model directories; {inputs}: the sentences (docs/figures/guide);
# {out}: where figures go; {scratch}: a folder for by-products that are not kept.
COMMANDS = [
    "rnnsearch figure structure --out {scratch}",
    "rnnsearch plot-attention --model {demo} --input {inputs}/apple-demo.en --out {out}/demo_apple.png",
    "rnnsearch explore --model {demo} --input {inputs}/apple-demo.en --out {out}/demo_explorer.html "
    "--lang zh",
    "rnnsearch plot-attention --model {tatoeba} --input {inputs}/apple.en --out {out}/tatoeba_apple.png",
    "rnnsearch explore --model {tatoeba} --input {inputs}/tatoeba_sentences.en "
    "--out {out}/tatoeba_explorer.html --lang zh",
]
# How the guide writes them (paths relative to the repository root).
GUIDE_PATHS = {"demo": "rnnsearch-demo/model", "tatoeba": "runs/tatoeba_en_zh",
               "inputs": "docs/figures/guide", "out": "docs/figures/guide", "scratch": "figures"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", default=GUIDE_PATHS["demo"], help="model directory written by `rnnsearch demo`")
    ap.add_argument("--tatoeba", default=GUIDE_PATHS["tatoeba"], help="the Tatoeba English->Chinese model")
    ap.add_argument("--out", default=str(HERE / "figures" / "guide"), help="where the guide's figures go")
    ap.add_argument("--structure-out", metavar="DIR",
                    help="where structure.png goes (default: the folder above --out, docs/figures/)")
    ap.add_argument("--structure-epochs", type=int, metavar="N",
                    help="train the structure figure's model N epochs, not the command's own 12 "
                         "(a quick run of the whole script, as the tests do; not for the guide)")
    args = ap.parse_args(argv)
    for name in ("demo", "tatoeba"):
        if not Path(getattr(args, name)).is_dir():
            print(f"make_figures: {getattr(args, name)}: no such model directory (--{name})", file=sys.stderr)
            return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    structure_out = Path(args.structure_out) if args.structure_out else out.parent
    structure_out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        paths = {"demo": args.demo, "tatoeba": args.tatoeba, "inputs": str(HERE / "figures" / "guide"),
                 "out": str(out), "scratch": scratch}
        for template in COMMANDS:
            argv_ = shlex.split(template.format(**paths))
            if argv_[1:3] == ["figure", "structure"] and args.structure_epochs:
                argv_ += ["--epochs", str(args.structure_epochs)]
            print("$", " ".join(argv_), flush=True)
            done = subprocess.run([sys.executable, "-m", "rnnsearch", *argv_[1:]])
            if done.returncode:
                print(f"make_figures: `{template}` failed", file=sys.stderr)
                return done.returncode
        shutil.copy(Path(scratch) / "structure.png", structure_out / "structure.png")
    print(f"figures in {out}, structure.png in {structure_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
