import contextlib
import os
import random
from pathlib import Path

import pytest
import torch

from rnnsearch.config import ModelConfig, config_from_dict
from rnnsearch.engine.data.vocab import PAD
from rnnsearch.engine.train.trainer import train
from rnnsearch.nn.model import build_model
from rnnsearch.tools.toy import write_toy_corpus

# In a parallel run (pytest-xdist: `-n auto` in pyproject.toml) every worker gets its share of the
# cores, it and the commands and notebook kernel it starts: torch's default of one thread per core
# in each worker would put workers x cores threads on the cores, and OpenMP kernels oversubscribed
# so run many times slower, not merely at a share of the speed (docs/robustness.md).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_collection_modifyitems(items):
    """The longest tests first: a parallel run then spreads them over its workers instead of
    ending on one of them while the others wait."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # a stable sort


# The development copies of the real corpora (multi30k/, europarl_it_en/, ...), from the environment:
# the tests that read them skip, saying so, where it is not set (.ci/run sets it when they are there).
SHARED_DATA = Path(os.environ["RNNSEARCH_DATA"]) if os.environ.get("RNNSEARCH_DATA") else None


def tiny_model(arch="rnnsearch", seed=0, double=True, scale=0.5, **kw):
    """A small model with large random weights, so attention is far from uniform."""
    torch.manual_seed(seed)
    # init="paper" draws the same random numbers as before model.init existed: the same tiny models
    cfg = ModelConfig(arch=arch, emb=kw.pop("emb", 8), hidden=kw.pop("hidden", 6), align=kw.pop("align", 7),
                      maxout=kw.pop("maxout", 5), init=kw.pop("init", "paper"), **kw)
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
    """Playwright's sync API and the path of Debian's chromium, or skip the browser test saying what
    is missing."""
    import shutil

    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install -e '.[test]')")
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on this machine: the browser tests drive Debian's chromium "
                    "(apt-get install chromium; .ci/run installs it)")
    return sync_api, path


@contextlib.contextmanager
def browser_page(url: str):
    """A page of headless Chromium at `url` (or the test skipped, as browser_or_skip says), closed after."""
    sync_api, chromium = browser_or_skip()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page()
            page.goto(url)
            yield page
        finally:
            browser.close()


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


def shared_data_or_skip() -> Path:
    if SHARED_DATA is None:
        pytest.skip("real corpora not available: set RNNSEARCH_DATA to a folder holding multi30k/ etc.")
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not available: RNNSEARCH_DATA={SHARED_DATA} is not a folder")
    return SHARED_DATA


@pytest.fixture
def shared_data():
    return shared_data_or_skip()


TOY = dict(vocab=10, min_len=3, max_len=7)
# A test that trains a model and asserts its quality must hold on any CPU. Other seeds and thread
# counts (another summation order) stand in for other machines: RNNSEARCH_TEST_SEED=1 and
# RNNSEARCH_TEST_THREADS=2 re-run every toy training under them (docs/robustness.md).
TRAIN_SEED = int(os.environ.get("RNNSEARCH_TEST_SEED", "1234"))
TRAIN_THREADS = int(os.environ.get("RNNSEARCH_TEST_THREADS", "1"))


def toy_config(tmp: Path, name: str, **train_kw) :
    data = write_toy_corpus(tmp / "data", task="reverse", n_train=1500, n_valid=50, **TOY)
    train_cfg = {"max_epochs": 12, "lr": 0.01, "batch_size": 32, "valid_every": 0, "progress": False,
                 "tensorboard": False, "threads": TRAIN_THREADS, "seed": TRAIN_SEED}
    train_cfg.update(train_kw)
    return config_from_dict({"preset": "tiny", "model_dir": str(tmp / name), "data": data,
                             # Appendix B's init: the anti-diagonal emerges cleanly from it
                             # (docs/robustness.md)
                             "model": {"emb": 24, "hidden": 32, "align": 32, "maxout": 32, "init": "paper"},
                             "train": train_cfg, "decode": {"beam": 3}})


@pytest.fixture(scope="session")
def reverse_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reverse")
    # until the validation loss says it has learned the task, not a fixed 12 epochs: a seed (or a
    # CPU) whose run learns later gets the epochs it needs. Batches of 8: with 32, 3 of 16 seeds
    # settled on attention one or two words off the anti-diagonal on an AMD EPYC; with 16, 0 of 21
    # there but 6 of 42 on an Intel Xeon with AMX; with 8, 0 of 42 on the Xeon (docs/robustness.md)
    return train(toy_config(tmp, "model", max_epochs=30, stop_valid_loss=0.01, batch_size=8))


