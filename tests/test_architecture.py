"""The package's shape: no import cycles, imports only point down the layers, PyFlink stays in
``flink_agents/flink/``.

Every module of ``flink_agents/`` is parsed with :mod:`ast`; every import counts, wherever it is
written (module level, inside a function, under ``if TYPE_CHECKING:``), and relative imports are
resolved. The layer order below is the contract docs/architecture.md describes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "flink_agents"

# Tiers from the bottom up: a layer may import its own modules and any layer of a lower tier.
LAYER_TIERS: tuple[tuple[str, ...], ...] = (
    ("api",),
    ("agents", "plan", "providers"),
    # The event log's records, listeners and sinks: below durable and runtime, which emit into
    # it; it knows runs and calls only through protocols, so it needs nothing of theirs.
    ("observability",),
    ("durable",),
    ("runtime",),
    ("testing", "replay"),  # test helpers; replaying recorded runs: both drive the engine
    ("flink",),
    # The command line and the console: both show what the layers below hold.
    ("cli", "console"),
)
# Imports between two layers of one tier that are allowed (importer layer, imported layer).
ALLOWED_SIDEWAYS: frozenset[tuple[str, str]] = frozenset(
    {
        ("plan", "agents"),  # YAML agents are built as ReActAgents
        # The console shows what the command line's readers read and writes decisions with
        # its writer; `flink-agents console` starts it.
        ("console", "cli"),
        ("cli", "console"),
    }
)
# The top-level ``flink_agents`` module re-exports from every layer; it loads Flink lazily.
FRONT_DOOR = PACKAGE
LAZY_ONLY_FROM_FRONT_DOOR = ("flink",)
# The only layer that may import PyFlink.
PYFLINK_LAYER = "flink"

TIER_OF: dict[str, int] = {layer: tier for tier, names in enumerate(LAYER_TIERS) for layer in names}


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``importer`` loads ``imported`` (a module name)."""

    importer: str
    imported: str
    line: int
    lazy: bool  # inside a function or under ``if TYPE_CHECKING:``: not run at import time


ImportGraph = Mapping[str, list[Import]]


# --- building the graph --------------------------------------------------------------------------


def module_name(path: str) -> str:
    """``flink_agents/api/__init__.py`` -> ``flink_agents.api``; a file ``x/y.py`` -> ``x.y``."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(
    nodes: Iterable[ast.AST], lazy: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in ``nodes``, and whether it runs only later (or never)."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_nodes(node.body, True)
            yield from _import_nodes(node.orelse, lazy)
        else:
            in_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from _import_nodes(ast.iter_child_nodes(node), lazy or in_function)


def imports_of(path: str, source: str, modules: set[str]) -> list[Import]:
    """The imports of the module at ``path`` (relative to the repository), resolved.

    ``from pkg import name`` loads the module ``pkg.name`` when there is one, else ``pkg``.
    """
    importer = module_name(path)
    package = importer if path.endswith("__init__.py") else importer.rpartition(".")[0]
    found: list[Import] = []
    for node, lazy in _import_nodes(ast.parse(source, filename=path).body, False):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            base = ".".join(part for part in (base, node.module) if part)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        found.extend(Import(importer, target, node.lineno, lazy) for target in targets)
    return found


def graph_from_sources(sources: Mapping[str, str]) -> dict[str, list[Import]]:
    """The import graph of modules given as ``{path: source}``."""
    modules = {module_name(path) for path in sources}
    return {module_name(path): imports_of(path, text, modules) for path, text in sources.items()}


def package_graph() -> dict[str, list[Import]]:
    """The import graph of every module of the ``flink_agents`` package in this checkout."""
    files = sorted((ROOT / PACKAGE).rglob("*.py"))
    return graph_from_sources(
        {path.relative_to(ROOT).as_posix(): path.read_text() for path in files}
    )


# --- the checks ----------------------------------------------------------------------------------


def layer_of(module: str) -> str | None:
    """``flink_agents.durable.store.kafka`` -> ``durable``; None for the front door and others."""
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1]


def import_cycles(graph: ImportGraph) -> list[list[str]]:
    """One cycle per strongly connected group of modules, as ``[a, b, ..., a]``."""
    edges = {
        module: sorted({edge.imported for edge in imports if edge.imported in graph})
        for module, imports in graph.items()
    }
    cycles = []
    for group in _strongly_connected(edges):
        start = min(group)
        if len(group) > 1 or start in edges[start]:
            cycles.append(_shortest_cycle(start, group, edges))
    return sorted(cycles)


def _strongly_connected(edges: Mapping[str, list[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph may be deeper than the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    groups.append(group)
            elif successor not in index:
                index[successor] = low[successor] = len(index)
                stack.append(successor)
                on_stack.add(successor)
                work.append((successor, iter(edges[successor])))
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
    return groups


def _shortest_cycle(start: str, group: set[str], edges: Mapping[str, list[str]]) -> list[str]:
    """Breadth-first inside ``group`` from ``start`` back to itself."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            if start in edges[node]:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            for successor in edges[node]:
                if successor in group and successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    raise AssertionError(f"{start} is in no cycle")


def layer_violations(graph: ImportGraph) -> list[str]:
    """Imports that point up (or sideways) across layers, and modules in no known layer."""
    found = []
    for module, imports in sorted(graph.items()):
        if module == FRONT_DOOR:
            continue
        layer = layer_of(module)
        if layer not in TIER_OF:
            found.append(f"{module} is in no layer: add {layer!r} to LAYER_TIERS")
            continue
        for edge in imports:
            target = layer_of(edge.imported)
            if target is None or target == layer or target not in TIER_OF:
                continue
            if TIER_OF[target] < TIER_OF[layer] or (layer, target) in ALLOWED_SIDEWAYS:
                continue
            found.append(
                f"{module} (layer {layer}, tier {TIER_OF[layer]}) imports {edge.imported} "
                f"(layer {target}, tier {TIER_OF[target]}) at line {edge.line}"
            )
    return found


def front_door_violations(graph: ImportGraph) -> list[str]:
    """Layers the front door must load lazily but imports when it is imported."""
    return [
        f"{FRONT_DOOR} imports {edge.imported} (layer {layer_of(edge.imported)}) at import "
        f"time, line {edge.line}: load it lazily (in a function or under TYPE_CHECKING)"
        for edge in graph.get(FRONT_DOOR, [])
        if not edge.lazy and layer_of(edge.imported) in LAZY_ONLY_FROM_FRONT_DOOR
    ]


def pyflink_violations(graph: ImportGraph) -> list[str]:
    """Imports of pyflink by a module outside the Flink layer."""
    return [
        f"{module} (layer {layer_of(module)}) imports {edge.imported} at line {edge.line}"
        for module, imports in sorted(graph.items())
        if layer_of(module) != PYFLINK_LAYER
        for edge in imports
        if edge.imported.split(".")[0] == "pyflink"
    ]


def private_violations(graph: ImportGraph) -> list[str]:
    """Imports of a ``_``-prefixed module from outside the package that holds it."""
    found = []
    for module, imports in sorted(graph.items()):
        for edge in imports:
            parts = edge.imported.split(".")
            private = [i for i, part in enumerate(parts) if _is_private(part)]
            if parts[0] != PACKAGE or not private:
                continue
            owner = ".".join(parts[: private[0]])
            if module != owner and not module.startswith(owner + "."):
                found.append(
                    f"{module} imports {edge.imported} at line {edge.line}: a private module of "
                    f"{owner}"
                )
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# --- the package obeys them ----------------------------------------------------------------------


def test_the_package_has_no_import_cycles():
    cycles = [" -> ".join(cycle) for cycle in import_cycles(package_graph())]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_imports_point_down_the_layers():
    violations = layer_violations(package_graph())
    assert violations == [], "imports against the layer order:\n" + "\n".join(violations)


def test_the_front_door_loads_flink_lazily():
    violations = front_door_violations(package_graph())
    assert violations == [], "\n".join(violations)


def test_only_the_flink_layer_imports_pyflink():
    violations = pyflink_violations(package_graph())
    assert violations == [], "pyflink outside flink_agents/flink/:\n" + "\n".join(violations)


def test_private_modules_are_imported_only_inside_their_package():
    violations = private_violations(package_graph())
    assert violations == [], "\n".join(violations)


def test_every_module_was_parsed_and_every_layer_exists():
    graph = package_graph()
    assert {layer_of(module) for module in graph} - {None} == set(TIER_OF)
    assert "flink_agents.durable.store.kafka" in graph


# --- one owner for the durable call and for the engine's assembly (issue 31) --------------------

ENGINE = "RunEngine"
COMPOSITION_ROOT = "flink_agents/runtime/assembly.py"


def repository_sources(*folders: str) -> dict[str, str]:
    """``{path: source}`` of the package and the benchmarks (every host of an engine), and of
    ``folders``."""
    files = sorted(
        path for folder in (PACKAGE, "bench", *folders) for path in (ROOT / folder).rglob("*.py")
    )
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in files}


ENGINE_TESTS = "tests/runtime/test_engine"
"""The tests of the engine itself (``test_engine*.py``): the only ones that construct it."""


def call_runner_classes(sources: Mapping[str, str]) -> list[str]:
    """Classes named ``*CallRunner`` that are not a ``Protocol``: each is a second
    implementation of the durable-call protocol (DurableCalls is the one)."""
    found = []
    for path, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.name.endswith("CallRunner"):
                bases = {ast.unparse(base) for base in node.bases}
                if not bases & {"Protocol", "typing.Protocol"}:
                    found.append(f"{path}:{node.lineno} class {node.name}")
    return found


def engine_constructions(sources: Mapping[str, str]) -> list[str]:
    """Where an engine is built, or its class handed to a factory, outside the composition
    root: every host must call ``Runtime.build``."""
    found = []
    for path, source in sources.items():
        if path == COMPOSITION_ROOT:
            continue
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call):
                continue
            named = [node.func, *node.args, *(keyword.value for keyword in node.keywords)]
            for part in named:
                name = part.attr if isinstance(part, ast.Attribute) else getattr(part, "id", None)
                if name == ENGINE:
                    found.append(f"{path}:{node.lineno} {ast.unparse(node)[:60]}")
    return found


def test_one_class_implements_the_durable_call_protocol():
    # The tests too: a test double of the protocol would test itself, not the durable path.
    assert call_runner_classes(repository_sources("tests", "e2e")) == []


def test_the_engine_is_built_only_in_the_composition_root():
    assert engine_constructions(repository_sources()) == []
    tests = repository_sources("tests", "e2e")
    found = engine_constructions(
        {p: s for p, s in tests.items() if p.startswith(("tests/", "e2e/"))}
    )
    assert [line for line in found if not line.startswith(ENGINE_TESTS)] == []


# --- examples import only package faces (issue 31) ----------------------------------------------

EXAMPLES = "examples"


def package_modules() -> set[str]:
    """Every module of the package, faces (a package's ``__init__``) included."""
    return {
        module_name(path.relative_to(ROOT).as_posix()) for path in (ROOT / PACKAGE).rglob("*.py")
    }


def package_faces() -> set[str]:
    """The package's faces: ``flink_agents`` and every package's ``__init__`` below it."""
    return {
        module_name(path.relative_to(ROOT).as_posix())
        for path in (ROOT / PACKAGE).rglob("__init__.py")
    }


def non_face_imports(sources: Mapping[str, str], modules: set[str], faces: set[str]) -> list[str]:
    """Imports of a ``flink_agents`` module that is not a package's face (``from face import
    submodule`` too), as ``path:line``: what an example shows a user must be the stable
    surface, not a module behind it. ``modules``: the package's modules."""
    found = []
    for path, source in sorted(sources.items()):
        for edge in imports_of(path, source, modules):
            line = f"{path}:{edge.line} imports {edge.imported}"
            if edge.imported.split(".")[0] == PACKAGE and edge.imported not in faces:
                found.append(line)
    return list(dict.fromkeys(found))  # one line per module an import statement names


def example_sources() -> dict[str, str]:
    files = sorted((ROOT / EXAMPLES).rglob("*.py"))
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in files}


def test_examples_import_only_package_faces():
    violations = non_face_imports(example_sources(), package_modules(), package_faces())
    assert violations == [], "examples importing behind a package's face:\n" + "\n".join(violations)


# --- names that tell the rooms apart (issue 31) -------------------------------------------------

SHARED_FILE_NAMES = frozenset({"__init__.py", "__main__.py"})  # a package's face and its command
ONE_DEFINITION = ("ToolSpec", "ActionSpec", "CallKind")  # each was defined twice once


def repeated_file_names(paths: Iterable[str]) -> dict[str, frozenset[str]]:
    """File names (other than a package's ``__init__.py`` and ``__main__.py``) that more than one
    module has, each with the paths that have it."""
    by_name: dict[str, set[str]] = {}
    for path in paths:
        name = path.rpartition("/")[2]
        if name not in SHARED_FILE_NAMES:
            by_name.setdefault(name, set()).add(path)
    return {name: frozenset(found) for name, found in sorted(by_name.items()) if len(found) > 1}


def definitions_of(names: Iterable[str], sources: Mapping[str, str]) -> dict[str, list[str]]:
    """Where each of ``names`` is defined at a module's top level (a class or an assignment, a
    type alias too), as ``path:line``."""
    wanted = set(names)
    found: dict[str, list[str]] = {name: [] for name in sorted(wanted)}
    for path, source in sorted(sources.items()):
        for node in ast.parse(source).body:
            if isinstance(node, ast.ClassDef):
                defined = [node.name]
            elif isinstance(node, ast.Assign):
                defined = [target.id for target in node.targets if isinstance(target, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined = [node.target.id]
            else:
                continue
            for name in wanted.intersection(defined):
                found[name].append(f"{path}:{node.lineno}")
    return found


def package_sources() -> dict[str, str]:
    """``{path: source}`` of every module of the package."""
    return {
        path.relative_to(ROOT).as_posix(): path.read_text()
        for path in sorted((ROOT / PACKAGE).rglob("*.py"))
    }


def test_no_two_modules_share_a_file_name():
    repeated = {
        name: sorted(paths) for name, paths in repeated_file_names(package_sources()).items()
    }
    assert repeated == {}, "give each module a name that says what it holds"


def test_tool_spec_action_spec_and_call_kind_are_each_defined_once():
    definitions = definitions_of(ONE_DEFINITION, package_sources())
    assert {name: len(where) for name, where in definitions.items()} == dict.fromkeys(
        ONE_DEFINITION, 1
    ), definitions


# --- the checker finds what it should ------------------------------------------------------------

SYNTHETIC = {
    "flink_agents/__init__.py": (
        "from typing import TYPE_CHECKING\n"
        "from flink_agents.api import Agent\n"
        "from flink_agents.flink import job\n"  # eager: a front-door violation
        "if TYPE_CHECKING:\n"
        "    from flink_agents.flink.job import JobSpec\n"
    ),
    "flink_agents/api/__init__.py": "from .agent import Agent\n",
    "flink_agents/api/agent.py": (
        "def build():\n"
        "    from flink_agents.runtime.engine import RunEngine\n"  # upward, inside a function
        "    return RunEngine\n"
    ),
    "flink_agents/api/tools.py": "import pyflink.datastream\n",
    "flink_agents/plan/compile.py": "from flink_agents.agents import react\n",  # allowed sideways
    "flink_agents/agents/__init__.py": "",
    "flink_agents/agents/react.py": "from ..plan import compile\n",  # sideways, not allowed
    "flink_agents/runtime/__init__.py": "from . import engine\n",
    "flink_agents/runtime/engine.py": "from flink_agents.runtime.host import Host\n",
    "flink_agents/runtime/host.py": "from flink_agents.runtime import engine\n",
    "flink_agents/flink/__init__.py": "",
    "flink_agents/flink/job.py": "from pyflink.datastream import StreamExecutionEnvironment\n",
    "flink_agents/ui/panel.py": "",
    "flink_agents/providers/_retry.py": "",
    "flink_agents/providers/openai.py": "from ._retry import retry\n",  # its own package: fine
    "flink_agents/durable/runner.py": "from flink_agents.providers._retry import retry\n",
}


def test_relative_and_function_level_imports_are_resolved():
    graph = graph_from_sources(SYNTHETIC)
    assert [(e.imported, e.line, e.lazy) for e in graph["flink_agents.api.agent"]] == [
        ("flink_agents.runtime.engine", 2, True)
    ]
    assert [e.imported for e in graph["flink_agents.agents.react"]] == ["flink_agents.plan.compile"]
    assert [e.imported for e in graph["flink_agents.runtime"]] == ["flink_agents.runtime.engine"]
    assert [e.imported for e in graph["flink_agents.api"]] == ["flink_agents.api.agent"]
    assert [(e.imported, e.lazy) for e in graph["flink_agents"]] == [
        ("typing", False),
        ("flink_agents.api", False),
        ("flink_agents.flink.job", False),
        ("flink_agents.flink.job", True),
    ]


def test_the_checker_reports_cycles_upward_imports_and_pyflink():
    graph = graph_from_sources(SYNTHETIC)

    assert import_cycles(graph) == [
        ["flink_agents.agents.react", "flink_agents.plan.compile", "flink_agents.agents.react"],
        ["flink_agents.runtime.engine", "flink_agents.runtime.host", "flink_agents.runtime.engine"],
    ]
    assert layer_violations(graph) == [
        "flink_agents.agents.react (layer agents, tier 1) imports flink_agents.plan.compile "
        "(layer plan, tier 1) at line 1",
        "flink_agents.api.agent (layer api, tier 0) imports flink_agents.runtime.engine "
        "(layer runtime, tier 4) at line 2",
        "flink_agents.ui.panel is in no layer: add 'ui' to LAYER_TIERS",
    ]
    assert front_door_violations(graph) == [
        "flink_agents imports flink_agents.flink.job (layer flink) at import time, line 3: "
        "load it lazily (in a function or under TYPE_CHECKING)"
    ]
    assert pyflink_violations(graph) == [
        "flink_agents.api.tools (layer api) imports pyflink.datastream at line 1"
    ]
    assert private_violations(graph) == [
        "flink_agents.durable.runner imports flink_agents.providers._retry at line 1: a private "
        "module of flink_agents.providers"
    ]


def test_the_checker_finds_an_example_importing_behind_a_face():
    faces = {PACKAGE, f"{PACKAGE}.api", f"{PACKAGE}.providers"}
    modules = faces | {f"{PACKAGE}.api.chat", f"{PACKAGE}.providers.scripted"}
    sources = {
        "examples/good.py": (
            "import flink_agents\n"
            "from flink_agents.api import Agent\n"
            "from flink_agents.providers import ScriptedChatModelConnection\n"
        ),
        "examples/bad.py": (
            "from flink_agents.api import Agent\n"
            "def late():\n"
            "    from flink_agents.providers.scripted import ScriptedTurn\n"
            "import flink_agents.api.chat\n"
            "from flink_agents.api import chat\n"
            "from flink_agents.providers.scripted import ScriptedTurn, ScriptedToolCall\n"
        ),
    }
    assert non_face_imports(sources, modules, faces) == [
        "examples/bad.py:3 imports flink_agents.providers.scripted",
        "examples/bad.py:4 imports flink_agents.api.chat",
        "examples/bad.py:5 imports flink_agents.api.chat",
        "examples/bad.py:6 imports flink_agents.providers.scripted",
    ]
    assert f"{PACKAGE}.durable.store" in package_faces()


def test_the_checker_finds_a_second_call_runner_and_an_engine_built_by_hand():
    sources = {
        "flink_agents/durable/call.py": "class CallRunner(Protocol):\n    pass\n",
        "flink_agents/replay/serving.py": "class RecordedCallRunner:\n    pass\n",
        COMPOSITION_ROOT: "engine = RunEngine(plan)\n",
        "flink_agents/runtime/keyed.py": "factory = partial(RunEngine, plan)\n",
        "bench/durable_overhead.py": "engine = runtime.RunEngine(plan, call_runner=None)\n",
    }
    assert call_runner_classes(sources) == [
        "flink_agents/replay/serving.py:1 class RecordedCallRunner"
    ]
    assert engine_constructions(sources) == [
        "flink_agents/runtime/keyed.py:1 partial(RunEngine, plan)",
        "bench/durable_overhead.py:1 runtime.RunEngine(plan, call_runner=None)",
    ]


def test_the_checker_finds_repeated_file_names_and_second_definitions():
    sources = {
        "flink_agents/__init__.py": "",
        "flink_agents/api/__init__.py": "",
        "flink_agents/api/chat.py": "class ToolSpec:\n    pass\n",
        "flink_agents/api/records.py": "CallKind = str\n",
        "flink_agents/plan/yaml/schema.py": "class ToolSpec:\n    pass\n",
        "flink_agents/observability/records.py": "CallKind: TypeAlias = str\nKind: type = str\n",
        "flink_agents/plan/__main__.py": "",
        "flink_agents/flink/__main__.py": "",
    }
    assert repeated_file_names(sources) == {
        "records.py": frozenset(
            {"flink_agents/api/records.py", "flink_agents/observability/records.py"}
        )
    }
    assert definitions_of(["ToolSpec", "CallKind", "ActionSpec"], sources) == {
        "ActionSpec": [],
        "CallKind": ["flink_agents/api/records.py:1", "flink_agents/observability/records.py:1"],
        "ToolSpec": ["flink_agents/api/chat.py:1", "flink_agents/plan/yaml/schema.py:1"],
    }
