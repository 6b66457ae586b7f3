"""No module-level state keyed by objects (DESIGN.md, principle 6): what a run, a cluster or
a group needs between calls hangs off that object and dies with it. A module-level
``WeakKeyDictionary`` keyed by ranks or runs is such a table (issue 26 found four); this
test reads every module with ``ast`` and refuses one at module level.
"""

import ast
from pathlib import Path

import numpy as np

import collsim

PACKAGE = Path(collsim.__file__).resolve().parent


def module_level_weak_key_tables():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            value = getattr(node, "value", None)
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(value, ast.Call):
                func = value.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "WeakKeyDictionary":
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_no_module_keeps_a_table_keyed_by_objects():
    assert module_level_weak_key_tables() == []


def test_the_front_ends_state_lives_on_the_run():
    from collsim import distributed as dist
    from collsim import mpi as MPI

    def main():
        dist.init_process_group("collsim")
        x = np.ones(2)
        dist.all_reduce(x)
        MPI.COMM_WORLD.allreduce(1.0)
        return sorted(collsim_run_state())

    def collsim_run_state():
        from collsim.runtime import blocking

        return blocking.current_rank()._execution.front_ends

    out = collsim.exec(main, n=2)
    assert out.returns == [["distributed", "mpi"], ["distributed", "mpi"]]
