"""Optional dependencies, imported in one place (system checks E011/E012 report them when missing)."""

from __future__ import annotations

import os
from typing import Any

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def openai_client(base_url: str | None, api_key: str | None, timeout: float, max_retries: int) -> tuple[Any, Any, str]:
    """``(openai module, client, base URL)`` for any OpenAI-compatible server; ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY`` fill what is not given. Raises ImportError without the ``openai`` extra."""
    # Optional: the ``openai`` extra; imported only by a site that configures an OpenAI-compatible backend.
    import openai

    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
    client = openai.OpenAI(
        base_url=base_url,
        # Local servers (Ollama, vLLM) need no key, but the client insists on one.
        api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
        timeout=timeout,
        max_retries=max_retries,
    )
    return openai, client, base_url
