"""A schedule's moves are made the way a reader expects, ``ChunkMove(src, dst, chunks,
reduce)``: no builder writes a frozen record's slots behind its ``__init__``."""

import pathlib
import re

import collsim
from collsim.collectives import double_tree, nccl_ring, schedule
from collsim.collectives.schedule import ChunkMove, RankRule

PACKAGE = pathlib.Path(collsim.__file__).parent
BEHIND_INIT = re.compile(r"object\.__new__\(|\.__set__\b")


def test_no_builder_makes_a_record_behind_its_init():
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted((PACKAGE / "collectives").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if BEHIND_INIT.search(line)
    ]
    assert found == []
    assert not any(hasattr(m, "_move") for m in (schedule, double_tree, nccl_ring))


def test_a_rule_step_gives_ordinary_moves():
    class Right(RankRule):
        def receiver(self, r):
            return (r + 1) % self.ranks

        def chunk(self, r):
            return r

    assert Right(4, reduce=True).move(3) == ChunkMove(3, 0, range(3, 4), True)
