"""What exists only for speed stays behind the fast seam (``collsim/fast/``): outside it,
no code switches the cyclic collector off and none names how the fast path stores a run's
transfers (packed columns, blocks).  The reference path records a ``Transfer`` per transfer
and leaves the collector alone (``tests/test_reference_path_collector.py``)."""

import ast
from pathlib import Path

import collsim

PACKAGE = Path(collsim.__file__).resolve().parent
FAST_STORAGE = {"PackedTransfers", "TransferBlock", "PACK_RECORDS", "add_block"}


def _outside_fast():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] != "fast":
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _collector_switches(tree):
    """Lines that call ``gc.disable()`` (docstring examples are text, not calls)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "disable"
        and getattr(node.func.value, "id", None) == "gc"
    ]


def _fast_storage_names(tree):
    """Lines naming the fast path's storage, as a name, an attribute or an import."""
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.alias):
            name = node.name.rsplit(".", 1)[-1]
        if name in FAST_STORAGE:
            found.append(node.lineno)
    return found


def _found_outside_fast(check):
    """``{module: lines}`` where ``check`` finds something, outside ``collsim/fast/``."""
    return {
        str(path.relative_to(PACKAGE)): lines
        for path, tree in _outside_fast()
        if (lines := check(tree))
    }


def test_only_the_fast_package_switches_the_collector_off():
    assert _found_outside_fast(_collector_switches) == {}


def test_only_the_fast_package_knows_how_it_stores_transfers():
    assert _found_outside_fast(_fast_storage_names) == {}


def test_the_checks_find_what_they_look_for():
    code = "import gc\nfrom .fast.packed import PACK_RECORDS\ngc.disable()\ntrace.add_block(b)\n"
    tree = ast.parse(code)
    assert _collector_switches(tree) == [3]
    assert _fast_storage_names(tree) == [2, 4]
