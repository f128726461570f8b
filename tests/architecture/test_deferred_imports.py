"""The rule of the house for imports inside functions: keep one there only where it defers a heavy or optional
dependency (the ONNX reader, the tokenizers, the ``openai`` extra...) or must wait for Django's app registry, with a
comment that says so, on its line or the line above. Anything else is imported at the top of its module, where a
reader sees a module's dependencies at once (and the import graph, test_import_graph.py, counts both anyway).

A run of imports with nothing between them (``AppConfig.ready()``'s) shares the comment above its first one."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import agent_handshake

PACKAGE = Path(agent_handshake.__file__).resolve().parent


#: Comments that are directives to a tool, not a reason.
DIRECTIVES = ("# noqa", "# type:", "# pragma", "# fmt:")


def unexplained_imports(source: str) -> list[tuple[int, str]]:
    """``(line, statement)`` of each import inside a function (a method, a nested function) that has no comment
    on its lines or on the line above it (above the first import of its run)."""
    lines = source.splitlines()
    comments = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and not token.string.startswith(DIRECTIVES)
    }
    found: dict[int, str] = {}
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for block in ast.walk(function):
            for field in ("body", "orelse", "finalbody"):
                statements = getattr(block, field, None)
                if not isinstance(statements, list):
                    continue
                first = None  # the first import of the current run
                for index, statement in enumerate(statements):
                    if not isinstance(statement, ast.Import | ast.ImportFrom):
                        first = None
                        continue
                    previous = statements[index - 1] if index else None
                    if first is None or previous is None or previous.end_lineno != statement.lineno - 1:
                        first = statement
                    own = set(range(statement.lineno, statement.end_lineno + 1))
                    above = first.lineno - 1
                    if own & comments or (above in comments and lines[above - 1].lstrip().startswith("#")):
                        continue
                    found[statement.lineno] = ast.unparse(statement)
    return sorted(found.items())


def package_unexplained_imports() -> set[tuple[str, str]]:
    return {
        (path.relative_to(PACKAGE).as_posix(), statement)
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.relative_to(PACKAGE).parts
        for _line, statement in unexplained_imports(path.read_text())
    }


def test_an_import_inside_a_function_says_why_it_is_deferred():
    assert sorted(package_unexplained_imports()) == []


def test_a_comment_on_the_line_or_above_the_run_explains_an_import():
    source = """
import json


def plain():
    import os

    return os


def explained():
    import onnxruntime  # heavy: loads the model's runtime

    # Not at import: the app registry is not ready yet.
    from .models import Job
    from .views import render

    return onnxruntime, Job, render


def after_code():
    # the comment above a run covers only that run
    from . import a

    b = 1
    from . import c  # noqa: F401

    class Nested:
        def method(self):
            if b:
                from . import d
"""
    assert unexplained_imports(source) == [(6, "import os"), (26, "from . import c"), (31, "from . import d")]
