"""``rnnsearch serve``: translation over HTTP (Starlette on uvicorn) — the native API and the
live attention explorer (native.py), the LibreTranslate API (libre.py) and the DeepL API
(deepl.py) over one or several models (hosted.py), each with its own Batcher (batching.py);
API keys, rate limit, quota, metrics and the SIGTERM drain (guard.py); what the LibreTranslate
and DeepL APIs share (compat.py); assembled in app.py. ``--backend onnx``: exported models
searched by the torch-free runtime behind the same APIs (exported.py).
"""

from rnnsearch.serve.app import Access, create_app, serve
from rnnsearch.serve.batching import Limits

__all__ = ["Access", "Limits", "create_app", "serve"]
