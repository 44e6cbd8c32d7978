import os
import random
from pathlib import Path

import pytest
import torch

from rnnsearch.config import ModelConfig, config_from_dict
from rnnsearch.model import build_model
from rnnsearch.toy import write_toy_corpus
from rnnsearch.train import train
from rnnsearch.vocab import PAD

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def tiny_model(arch="rnnsearch", seed=0, double=True, scale=0.5, **kw):
    """A small model with large random weights, so attention is far from uniform."""
    torch.manual_seed(seed)
    cfg = ModelConfig(arch=arch, emb=kw.pop("emb", 8), hidden=kw.pop("hidden", 6), align=kw.pop("align", 7),
                      maxout=kw.pop("maxout", 5), **kw)
    model = build_model(cfg, 17, 19)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, scale)
    if double:
        model.double()
    return model.eval()


def random_batch(lengths, vocab=17, seed=0):
    """Right-padded source ids (B, S) with ids >= 4 and its mask."""
    rng = random.Random(seed)
    width = max(lengths)
    src = torch.full((len(lengths), width), PAD, dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.tensor([rng.randrange(4, vocab) for _ in range(n)])
    return src, src != PAD


def browser_or_skip():
    """Playwright's sync API and the path of Debian's chromium, or skip the browser test saying what is missing."""
    import shutil

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on this machine: the browser tests drive Debian's chromium "
                    "(apt-get install chromium; .ci/run installs it)")
    return sync_api, path


TEST_DEVICE = os.environ.get("RNNSEARCH_TEST_DEVICE", "cpu")


def pytest_configure(config):
    # Asking for the GPU where there is none stops the run: skipping would report the GPU tested.
    if TEST_DEVICE.startswith("cuda") and not torch.cuda.is_available():
        raise pytest.UsageError(f"RNNSEARCH_TEST_DEVICE={TEST_DEVICE}, but this torch "
                                f"({torch.__version__}) sees no CUDA device")


@pytest.fixture
def device():
    """Where the device-aware tests run: RNNSEARCH_TEST_DEVICE (default cpu). On a GPU machine
    `RNNSEARCH_TEST_DEVICE=cuda pytest -k device` runs them on the GPU (benchmarks/gpu_speed.sh does)."""
    # TF32 off (cuDNN's default is on): a GPU's float32 then differs from a CPU's only in summation order
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield torch.device(TEST_DEVICE)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


@pytest.fixture
def shared_data():
    if not SHARED_DATA.exists():
        pytest.skip(f"corpora not available: {SHARED_DATA} is absent (tests read ../shared/data when present)")
    return SHARED_DATA


TOY = dict(vocab=10, min_len=3, max_len=7)


def toy_config(tmp: Path, name: str, **train_kw) :
    data = write_toy_corpus(tmp / "data", task="reverse", n_train=1500, n_valid=50, **TOY)
    train_cfg = {"max_epochs": 12, "lr": 0.01, "batch_size": 32, "valid_every": 0, "progress": False,
                 "tensorboard": False, "threads": 1}
    train_cfg.update(train_kw)
    return config_from_dict({"preset": "tiny", "model_dir": str(tmp / name), "data": data,
                             "model": {"emb": 24, "hidden": 32, "align": 32, "maxout": 32},
                             "train": train_cfg, "decode": {"beam": 3}})


@pytest.fixture(scope="session")
def reverse_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reverse")
    return train(toy_config(tmp, "model"))


