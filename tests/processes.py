"""Python processes a test starts, from the project's root (where ``python -c`` finds its packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_together(script: str, *args: str, count: int = 6, timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """Run ``script`` (``python -c``, with ``args``) in ``count`` processes, all started before any is waited for:
    how each one ended (its exit status, its output and its errors), in the order they were started."""
    started = [
        subprocess.Popen(
            [sys.executable, "-c", script, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    ended = []
    for process in started:
        out, err = process.communicate(timeout=timeout)
        ended.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return ended
