"""No import cycles between the project's modules, imports inside functions included.

A cycle hidden in a function-level import still ties two modules together: neither can be
read, tested or moved without the other, and which one loads first decides whether the
import works. The graph is import-linter's (grimp), which records every import statement
wherever it sits."""

from __future__ import annotations

import grimp

PACKAGES = ("ideareview", "llm", "studies", "judging")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing
    itself), each as a sorted list: Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return found


def _describe(edges: dict[str, set[str]], component: list[str]) -> str:
    """One cycle inside a component, written as a chain a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    node = start
    while True:
        nxt = sorted(m for m in edges[node] if m in members)
        back = start in nxt
        if back and len(path) > 1 or (back and node == start):
            return " -> ".join([*path, start])
        fresh = [m for m in nxt if m not in seen]
        if not fresh:
            return " -> ".join(component) + " (one strongly connected group)"
        node = fresh[0]
        path.append(node)
        seen.add(node)


def _project_edges() -> dict[str, set[str]]:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    return {
        module: {
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if imported.split(".")[0] in PACKAGES
        }
        for module in graph.modules
    }


def test_the_project_has_no_import_cycle():
    edges = _project_edges()
    cycles = [_describe(edges, c) for c in _cycles(edges)]
    assert not cycles, "import cycles (function-level imports count):\n" + "\n".join(cycles)


def test_the_cycle_check_finds_a_cycle_through_three_modules_and_names_it():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _describe(edges, ["a", "b", "c"]) == "a -> b -> c -> a"
    assert _cycles({"a": {"b"}, "b": set()}) == []
