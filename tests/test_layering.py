"""Imports point down the layer order of the design (DESIGN.md, "Layers"), and no package has
an import circle.

Every module under ``collsim/`` is read with ``ast`` (nothing is imported, so a broken module
still gets a precise report). Every import counts: module-level, inside a function, inside
``if TYPE_CHECKING:``, relative or absolute; moving an import into a function hides nothing.
(Imports by computed name are not seen: the only one, ``importlib.import_module`` of the
sub-commands in ``cli/__init__.py``, stays inside cli.)

Where the top-level modules sit (top first)::

    entry        collsim/__init__.py (the public facade: re-exports runtime), collsim/__main__.py
    cli          collsim/cli/
    launch       collsim/launch/ -- ``collsim exec``: runs unmodified SPMD scripts (the scoped
                 mpi4py import hook, per-rank output), above the APIs it serves
    mpi, distributed   collsim/mpi/, collsim/distributed/ -- mpi4py's and torch.distributed's
                 names on the blocking runtime and the collectives (above everything they call)
    teach        collsim/teach/ -- the lessons' checks and answer slots, and the build of a
                 translated lesson from the English code and its prose; lessons are run by
                 ``collsim lesson`` (cli, above) and may show the figures and plans below
    verify       collsim/verify/ -- ``collsim verify``'s checks: trains a scheme on the cluster
                 and on one device and compares them (above the parallel layer it runs)
    viz, plan, parallel, nn   as in DESIGN.md
    fast         collsim/fast/ -- the fast path behind one seam: a collective run alone, a
                 step at a time on arrays; the same result as the reference path below it
    collectives, runtime, network   as in DESIGN.md
    hardware     collsim/hardware/ -- machines as data (presets, files, NCCL's protocols):
                 topologies of real machines, so just above topology
    topology, units   as in DESIGN.md
    errors       collsim/errors.py -- the bottom: every layer may raise a collsim error

Inside ``collsim/parallel/`` the same rule holds between its parts (``PARALLEL_LAYERS``, top
first): ``runs/`` (one scheme alone through the trainer) over ``mesh``, ``mesh_run`` and
``mesh_setup`` (the one trainer) over ``config`` over ``inference/`` over ``context/`` over
the concepts ``data/``, ``experts/``, ``pipeline/`` and ``tensor/`` over the shared pieces
(``batch``, ``block``, ``modules``, ``accounting``, ``oracle``). So ``pipeline/`` and
``data/`` sit below the trainer that runs them.

An import of a package (``from collsim import Cluster``) counts as an import of that package's
``__init__``; ``from collsim import units`` counts as an import of ``collsim.units``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "collsim"

# Top first. A module may import its own layer and any layer after it in this list.
LAYERS = (
    "entry",
    "cli",
    "launch",
    "mpi",
    "distributed",
    "teach",
    "verify",
    "viz",
    "plan",
    "parallel",
    "nn",
    "fast",
    "collectives",
    "runtime",
    "network",
    "hardware",
    "topology",
    "course",
    "units",
    "errors",
)
RANK = {name: index for index, name in enumerate(LAYERS)}

# The deliberate up-imports: (importing module, imported module) -> why it is allowed. Each
# must stay inside a function (so importing the lower layer never loads the upper one) and a
# listed module covers its submodules, except the root ``collsim``, which matches only itself.
ALLOWED_UP_IMPORTS = {
    ("collsim.cli", "collsim"): (
        "build_parser() reads collsim.__version__ for `collsim --version`: package metadata, "
        "not the facade's API; the root's own imports (runtime, topology, units) are below cli"
    ),
    ("collsim.runtime.collective_calls", "collsim.collectives"): (
        "Cluster.all_reduce(...) and the other whole-cluster collective methods are the "
        "torch.distributed-style convenience entry (DESIGN.md: 'callable from plain code on a "
        "whole cluster'); they import collsim.collectives inside the method, so importing the "
        "runtime never loads the collectives and the collectives stay written against Rank"
    ),
    ("collsim.runtime.rank", "collsim.collectives"): (
        "Rank.all_reduce(...) and the other per-rank collective methods let a rank program "
        "`yield from rank.all_reduce(...)` as with torch.distributed; same reason as "
        "Cluster's: a function-level import of the public collectives API"
    ),
    ("collsim.collectives.api", "collsim.fast"): (
        "the one seam of the fast path: run_collective calls collsim.fast.run_alone when the "
        "cluster's fast setting is on, importing it inside the function, so the reference "
        "path (fast=False) never loads the fast package"
    ),
    ("collsim.runtime.cluster", "collsim.fast"): (
        "the fast path's other door in the same seam: Cluster.run enters collsim.fast."
        "engine_run (packed trace storage, the collector off) when the cluster's fast setting "
        "is on, importing it inside the method, so the reference path never loads it"
    ),
}

# Up-imports found in files this change does not own; each is to fix in issue 12.
# (importing module, imported module) -> what is wrong.
KNOWN_UP_IMPORTS: dict[tuple[str, str], str] = {}

# Import circles inside one package that are known and still to fix (each a frozenset of
# module names). Empty: a new circle fails the suite.
KNOWN_CYCLES: set[frozenset[str]] = set()


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``importer`` (module name) imports ``target`` at ``line``."""

    path: str  # file path relative to the repository, for the report
    line: int
    importer: str
    target: str
    statement: str  # the source text of the import, for the report
    in_function: bool = False  # inside a def (runs when called, not when the module loads)


def module_name(path: Path) -> str:
    """``collsim/plan/report.py`` -> ``collsim.plan.report``; a package's ``__init__`` names it."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The layer a ``collsim`` module belongs to (see the module docstring)."""
    parts = module.split(".")
    if parts[0] != "collsim":
        raise ValueError(f"{module!r} is not a collsim module")
    if len(parts) == 1 or parts[1] == "__main__":
        return "entry"
    if parts[1] not in RANK:
        raise ValueError(
            f"{module!r}: its top-level name {parts[1]!r} has no layer; add it to LAYERS "
            f"in tests/test_layering.py (one of {', '.join(LAYERS)})"
        )
    return parts[1]


def imports_in_source(
    source: str, path: str, importer: str, is_package: bool, known_modules: set[str]
) -> list[Import]:
    """Every import of a ``collsim`` module in ``source``, wherever it sits in the file.

    ``known_modules`` decides whether ``from pkg import name`` imports the submodule
    ``pkg.name`` or a name defined in ``pkg``.
    """
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    in_function = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for inner in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package[: len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = []
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.append(submodule if submodule in known_modules else base)
        else:
            continue
        statement = lines[node.lineno - 1].strip()
        for target in dict.fromkeys(targets):
            if target == "collsim" or target.startswith("collsim."):
                found.append(
                    Import(path, node.lineno, importer, target, statement, id(node) in in_function)
                )
    return found


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = all_modules()
KNOWN = set(MODULES)


def imports_of(module: str) -> list[Import]:
    path = MODULES[module]
    return imports_in_source(
        path.read_text(encoding="utf-8"),
        str(path.relative_to(ROOT)),
        module,
        path.name == "__init__.py",
        KNOWN,
    )


def up_imports(edges: list[Import]) -> list[Import]:
    """The edges that point up the layer order."""
    return [edge for edge in edges if RANK[layer_of(edge.target)] < RANK[layer_of(edge.importer)]]


def _matches(edge: Import, importer: str, target: str) -> bool:
    """``edge`` is the listed import: same importer, and the listed target or a module inside
    it (``collsim.collectives`` covers ``collsim.collectives.api``; ``collsim`` only itself)."""
    inside = target != "collsim" and edge.target.startswith(target + ".")
    return edge.importer == importer and (edge.target == target or inside)


def _allowed(edge: Import, table: dict[tuple[str, str], str]) -> bool:
    return edge.in_function and any(_matches(edge, *key) for key in table)


def describe(edge: Import) -> str:
    return (
        f"{edge.path}:{edge.line}: `{edge.statement}` -- layer {layer_of(edge.importer)!r} "
        f"imports layer {layer_of(edge.target)!r} ({edge.target}), which is above it "
        f"(order: {' > '.join(LAYERS)})"
    )


def cycles_within_packages(edges: list[Import]) -> list[list[str]]:
    """Import circles among the modules of one layer (``collsim.plan.*``, its ``__init__``
    included), each as a list of module names in import order, starting from the smallest.

    Edges between layers are left out: an up-import is reported by its own test.
    """
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if edge.importer != edge.target and layer_of(edge.importer) == layer_of(edge.target):
            graph.setdefault(edge.importer, set()).add(edge.target)
    found: set[tuple[str, ...]] = set()

    def visit(start: str, node: str, trail: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.add(tuple(trail))
            elif nxt not in trail and nxt > start:
                visit(start, nxt, [*trail, nxt])

    for start in sorted(graph):
        visit(start, start, [start])
    return [list(cycle) for cycle in sorted(found)]


ALL_EDGES = [edge for module in MODULES for edge in imports_of(module)]


# The parts of collsim/parallel/, top first; a part may import its own row and the rows after it.
PARALLEL_LAYERS = (
    ("runs",),  # one scheme alone: train_data_parallel, run_pipeline (call the trainer)
    ("mesh", "mesh_run", "mesh_setup"),  # the one N-D trainer, what it returns, what a rank holds
    ("config",),  # ParallelConfig: names every dimension's options
    ("inference",),  # serving: tensor- and pipeline-parallel decoding over tensor/'s split
    ("context",),  # context parallelism wraps tensor-parallel attention
    ("data", "experts", "pipeline", "tensor"),  # one concept a folder
    ("accounting", "batch", "block", "modules", "oracle"),  # shared by every concept
)
PARALLEL_RANK = {part: row for row, parts in enumerate(PARALLEL_LAYERS) for part in parts}

# Lazy names that keep a documented import path working (a module ``__getattr__``): each
# import stays inside the function, so loading the lower part never loads the upper one.
ALLOWED_PARALLEL_UP_IMPORTS = {
    ("collsim.parallel.data", "collsim.parallel.runs.data_parallel"): (
        "lesson 2 and the examples import train_data_parallel from collsim.parallel.data; "
        "it calls the trainer, which imports this package, so it loads on first use"
    ),
    ("collsim.parallel.pipeline.runner", "collsim.parallel.runs.pipeline"): (
        "the lessons (English and Japanese) import pipeline_step, toy_model and toy_batch "
        "from here; they call the trainer, so they load on first use"
    ),
}


def parallel_part(module: str) -> str | None:
    """The part of ``collsim/parallel/`` a module belongs to (``collsim.parallel.data.sync``
    -> ``data``); None for ``collsim.parallel`` itself and for modules outside it."""
    parts = module.split(".")
    if parts[:2] != ["collsim", "parallel"] or len(parts) == 2:
        return None
    if parts[2] not in PARALLEL_RANK:
        raise ValueError(
            f"{module!r}: {parts[2]!r} has no place in PARALLEL_LAYERS in tests/test_layering.py"
        )
    return parts[2]


def parallel_up_imports(edges: list[Import]) -> list[Import]:
    """The edges between parts of ``collsim/parallel/`` that point up its order."""
    found = []
    for edge in edges:
        importer, target = parallel_part(edge.importer), parallel_part(edge.target)
        if importer and target and PARALLEL_RANK[target] < PARALLEL_RANK[importer]:
            found.append(edge)
    return found


# --- the checker itself ----------------------------------------------------------------------


def _check_fake(source: str, importer: str, is_package: bool = False) -> list[Import]:
    known = KNOWN | {importer}
    return up_imports(imports_in_source(source, "fake.py", importer, is_package, known))


@pytest.mark.parametrize(
    "source, importer",
    [
        ("from ..runtime import Cluster\n", "collsim.network.engine"),
        ("from .. import runtime\n", "collsim.network.engine"),
        ("import collsim.collectives.api\n", "collsim.runtime.group"),
        ("from collsim.plan import report\n", "collsim.units"),
        ("from . import plan\n", "collsim.units"),
        ("def f():\n    from ..viz import memory\n    return memory\n", "collsim.plan.cost"),
        ("if True:\n    import collsim.cli\n", "collsim.viz.ring"),
        ("from collsim import Cluster\n", "collsim.topology"),
        ("from .units import parse_size\n", "collsim.errors"),
        ("from collsim.cli import main\n", "collsim.teach.feedback"),
    ],
)
def test_checker_catches_a_synthetic_up_import(source, importer):
    found = _check_fake(source, importer)
    assert len(found) == 1, found
    assert found[0].line == source.count("\n", 0, source.index("import")) + 1
    assert "which is above it" in describe(found[0])


@pytest.mark.parametrize(
    "source, importer",
    [
        ("from ..units import parse_size\n", "collsim.network.engine"),
        ("from .. import topology\n", "collsim.runtime.rank"),
        ("from .cost import plan_cost\n", "collsim.plan.report"),
        ("from . import errors\n", "collsim.units"),
        ("import numpy\nimport collsim.errors\n", "collsim.topology"),
        ("from .runtime import Cluster\n", "collsim"),
    ],
)
def test_checker_accepts_a_downward_import(source, importer):
    assert _check_fake(source, importer) == []


def _fake_edges(files: dict[str, str]) -> list[Import]:
    known = KNOWN | set(files)
    return [
        edge
        for module, source in files.items()
        for edge in imports_in_source(source, f"{module}.py", module, False, known)
    ]


def test_checker_finds_a_synthetic_circle():
    edges = _fake_edges(
        {
            "collsim.plan.a": "from .b import x\n",
            "collsim.plan.b": "def f():\n    from .c import y\n",
            "collsim.plan.c": "from . import a\nfrom ..units import z\n",
        }
    )
    assert cycles_within_packages(edges) == [["collsim.plan.a", "collsim.plan.b", "collsim.plan.c"]]
    assert "b.py:2: `from .c import y`" in describe_cycle(cycles_within_packages(edges)[0], edges)


def test_checker_finds_the_old_report_text_circle():
    """The planner's report and its text once imported each other, one side inside
    ``Report.__str__``: a function-level import still closes the circle."""
    edges = _fake_edges(
        {
            "collsim.plan.report": (
                "class Report:\n    def __str__(self):\n        from .text import render\n"
            ),
            "collsim.plan.text": "from .report import format_count, format_flops\n",
        }
    )
    assert cycles_within_packages(edges) == [["collsim.plan.report", "collsim.plan.text"]]


def test_checker_catches_the_pipeline_runner_above_the_trainer():
    """The old ``pipeline/runner.py`` imported the trainer, which imports ``pipeline/``."""
    edges = _fake_edges({"collsim.parallel.pipeline.runner": "from ..mesh import train\n"})
    assert [edge.target for edge in parallel_up_imports(edges)] == ["collsim.parallel.mesh"]
    lazy = "def __getattr__(name):\n    from ..runs import pipeline\n"
    edges = _fake_edges({"collsim.parallel.pipeline.runner": lazy})
    assert _allowed(parallel_up_imports(edges)[0], ALLOWED_PARALLEL_UP_IMPORTS)


def test_every_top_level_module_has_a_layer():
    assert {layer_of(module) for module in MODULES} <= set(LAYERS)


# --- the package -----------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: str(MODULES[m].relative_to(ROOT)))
def test_imports_point_down(module):
    edges = imports_of(module)
    wrong = [
        edge
        for edge in up_imports(edges)
        if not _allowed(edge, ALLOWED_UP_IMPORTS) and not _allowed(edge, KNOWN_UP_IMPORTS)
    ]
    assert not wrong, "imports that point up the layer order:\n" + "\n".join(map(describe, wrong))


@pytest.mark.parametrize("part", [p for row in PARALLEL_LAYERS for p in row])
def test_parallel_imports_point_down(part):
    """``pipeline/`` and ``data/`` sit below the mesh trainer; the runs that call it above."""
    edges = [edge for edge in ALL_EDGES if parallel_part(edge.importer) == part]
    wrong = [
        edge
        for edge in parallel_up_imports(edges)
        if not _allowed(edge, ALLOWED_PARALLEL_UP_IMPORTS)
    ]
    assert not wrong, "\n".join(
        f"{edge.path}:{edge.line}: `{edge.statement}` -- {part!r} imports "
        f"{parallel_part(edge.target)!r}, above it in PARALLEL_LAYERS {PARALLEL_LAYERS}"
        for edge in wrong
    )


def test_every_parallel_module_has_a_part():
    modules = [m for m in MODULES if m.startswith("collsim.parallel.")]
    assert {parallel_part(m) for m in modules} <= set(PARALLEL_RANK)
    assert {m.split(".")[2] for m in modules} == set(PARALLEL_RANK)  # no part left listed empty


def test_every_listed_parallel_up_import_still_exists():
    ups = parallel_up_imports(ALL_EDGES)
    for key in ALLOWED_PARALLEL_UP_IMPORTS:
        assert any(_matches(edge, *key) for edge in ups), f"stale exception {key}"


def test_every_listed_up_import_still_exists():
    """An exception that no longer matches any import is stale: remove it from the list."""
    ups = up_imports(ALL_EDGES)
    for table in (ALLOWED_UP_IMPORTS, KNOWN_UP_IMPORTS):
        for key in table:
            assert any(_matches(edge, *key) for edge in ups), f"stale exception {key}"


def test_a_listed_up_import_must_stay_inside_a_function():
    """Moving a listed import to module level would load the upper layer with the lower one."""
    known = KNOWN | {"collsim.runtime.rank"}
    source = "from ..collectives.api import collective\n"
    edges = imports_in_source(source, "rank.py", "collsim.runtime.rank", False, known)
    assert not _allowed(up_imports(edges)[0], ALLOWED_UP_IMPORTS)
    edges = imports_in_source(
        "def f():\n    " + source, "rank.py", "collsim.runtime.rank", False, known
    )
    assert _allowed(up_imports(edges)[0], ALLOWED_UP_IMPORTS)
    edges = imports_in_source(
        "def f():\n    from collsim import Cluster\n", "x.py", "collsim.cli.run", False, known
    )
    assert not _allowed(up_imports(edges)[0], ALLOWED_UP_IMPORTS)


PACKAGE_LAYERS = [layer for layer in LAYERS if (PACKAGE / layer).is_dir()]


@pytest.mark.parametrize("layer", PACKAGE_LAYERS)
def test_no_import_circle_inside_a_package(layer):
    edges = [edge for edge in ALL_EDGES if layer_of(edge.importer) == layer]
    cycles = [c for c in cycles_within_packages(edges) if frozenset(c) not in KNOWN_CYCLES]
    assert not cycles, f"import circles in collsim/{layer}/:\n" + "\n\n".join(
        describe_cycle(cycle, edges) for cycle in cycles
    )


def describe_cycle(cycle: list[str], edges: list[Import]) -> str:
    """Each import of the circle with its file and line."""
    steps = zip(cycle, [*cycle[1:], cycle[0]])
    return "\n".join(
        f"  {edge.path}:{edge.line}: `{edge.statement}` ({edge.importer} -> {edge.target})"
        for importer, target in steps
        for edge in edges
        if edge.importer == importer and edge.target == target
    )


def test_readme_layer_table_matches_the_folders_and_the_layer_order():
    """docs/architecture.md's "How it is built" names every layer, in this file's order, with
    its folder."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`collsim" in line]
    named, folders = [], []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        named += [n.strip() for n in cells[0].split(",")]
        folders += [f.strip("`/ ") for f in cells[1].split(",")]
    assert named == [layer for layer in LAYERS if layer != "entry"]
    on_disk = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    on_disk |= {p.name for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert on_disk == {Path(folder).name for folder in folders}  # every folder, nothing else


def contributing_layer_rows() -> list[tuple[str, list[str]]]:
    """CONTRIBUTING.md's layer list ("House rules the tests keep", its first code block):
    ``(layer, [folder or file, ...])`` per row, top first."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    heading = "## House rules the tests keep"
    assert heading in text, f"CONTRIBUTING.md has no {heading!r} section listing the layers"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    rows = []
    for line in block.strip("\n").splitlines():
        name, rest = line.split(maxsplit=1)
        places = rest.split(": ", 1)[0]  # "collsim/cli/: the command" -> "collsim/cli/"
        rows.append((name, [place.strip() for place in places.split(",")]))
    return rows


def test_contributing_describes_the_real_layer_list():
    """CONTRIBUTING.md describes what is: every layer of ``LAYERS``, in its order, with the
    folder or file that holds it (DESIGN.md's list is the direction, not the check)."""
    rows = contributing_layer_rows()
    assert [name for name, _ in rows] == list(LAYERS)
    for name, places in rows:
        for place in places:
            path = ROOT / place if place.startswith("collsim") else PACKAGE / place
            assert path.exists(), f"CONTRIBUTING.md: layer {name!r} names {place}, not on disk"
            if name != "entry":
                assert Path(place).stem == name, f"{place} is not the {name!r} layer"


def layers_without_modules(layers: tuple[str, ...], modules: set[str]) -> list[str]:
    """The listed layers that no module of the package is in (a layer left behind)."""
    placed = {layer_of(module) for module in modules}
    return [layer for layer in layers if layer not in placed]


def test_a_listed_layer_has_modules():
    """The list says what is: a layer that was removed or renamed leaves ``LAYERS`` too."""
    assert layers_without_modules(LAYERS, set(MODULES)) == []
    assert layers_without_modules(LAYERS, set(MODULES) - {"collsim.units"}) == ["units"]
