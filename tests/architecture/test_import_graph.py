"""The package's import graph, as import-linter builds it (grimp): no module imports, directly or through others,
a module that imports it back (imports inside functions count too: moving an import into a function hides a cycle
from the interpreter, not from this test); and every module is in a layer of the import-linter contract that
``make lint`` checks, so a new module cannot sit outside the architecture unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

import grimp
import pytest
import tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("agent_handshake", cache_dir=None)


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in on_stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_the_package_has_no_import_cycles(graph):
    assert len(graph.modules) > 100  # the whole package was read
    assert import_cycles(graph) == []


def layered_packages() -> list[str]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    return [name for contract in contracts for layer in contract.get("layers", []) for name in re.split(r"[|:]", layer)]


def test_every_module_is_in_a_layer(graph):
    layers = [name.strip() for name in layered_packages()]
    assert "agent_handshake.concierge" in layers
    outside = [
        module
        for module in sorted(graph.modules - {"agent_handshake"})
        if not any(module == layer or module.startswith(f"{layer}.") for layer in layers)
    ]
    assert outside == []


def test_a_cycle_is_found_however_long():
    graph = grimp.ImportGraph()
    for importer, imported in [("a.one", "a.two"), ("a.two", "a.three"), ("a.three", "a.one"), ("a.three", "a.four")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph) == [["a.one", "a.three", "a.two"]]
