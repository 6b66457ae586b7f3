"""One class is named DeviceMesh: torch's per-rank handle in ``collsim.distributed``. The grid
of ranks with named dimensions that it (and the trainer) lays ranks on is ``RankGrid``."""

import ast
from pathlib import Path

import collsim
from collsim import distributed as dist
from collsim.parallel.config import ParallelConfig
from collsim.runtime import blocking
from collsim.runtime.group import RankGrid

PACKAGE = Path(__file__).resolve().parents[1] / "collsim"


def classes_named(name):
    return [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name == name
    ]


def test_one_class_is_named_device_mesh():
    assert classes_named("DeviceMesh") == ["collsim/distributed/device_mesh.py"]
    assert classes_named("RankGrid") == ["collsim/runtime/group.py"]


def test_the_trainer_and_torchs_device_mesh_lay_ranks_on_one_grid():
    assert isinstance(ParallelConfig(dp=2, tp=2).mesh(), RankGrid)

    def main():
        mesh = dist.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
        return type(mesh).__name__, type(mesh._grid).__name__, mesh.get_group("tp").ranks

    run = blocking.run(collsim.Cluster(collsim.topology.switch(4)), main)
    assert run.returns[3] == ("DeviceMesh", "RankGrid", (2, 3))
