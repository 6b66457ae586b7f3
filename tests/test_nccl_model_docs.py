"""docs/nccl-model.md's choice tables are what the model chooses: one source, the model."""

import re
from pathlib import Path

import pytest

from collsim import hardware
from collsim.collectives.nccl_model import graph_of, predict
from collsim.units import parse_size

DOC = Path(__file__).resolve().parents[1] / "docs" / "nccl-model.md"


def tables():
    """``{collective: (column headers, rows)}`` read from the document."""
    found = {}
    for name, body in re.findall(r"\*\*([a-z-]+)\*\*\n\n((?:\|.*\n)+)", DOC.read_text()):
        lines = [[c.strip() for c in line.strip("|\n").split("|")] for line in body.splitlines()]
        found[name.replace("-", "_")] = (lines[0][1:], lines[2:])
    return found


def test_the_document_has_all_three_tables():
    assert set(tables()) == {"all_reduce", "all_gather", "reduce_scatter"}


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
def test_every_cell_is_the_models_choice(collective):
    headers, rows = tables()[collective]
    assert len(headers) == 8 and len(rows) == 7
    for row in rows:
        size = parse_size(row[0].replace(" ", ""))
        for header, cell in zip(headers, row[1:]):
            gpu, nodes = header.split(" x ")
            graph = graph_of(hardware.preset(f"dgx-{gpu.lower()}"), int(nodes))
            assert predict(graph, collective, size)[1].entry.label == cell, (row[0], header)


README_TABLES = [DOC.parents[1] / name for name in ("README.md", "README.ja.md")]


@pytest.mark.parametrize("readme", README_TABLES, ids=lambda p: p.name)
def test_the_readme_table_is_the_models_choice_for_all_three(readme):
    """The README's one table: all-reduce · all-gather and reduce-scatter in each cell."""
    lines = re.search(r"(\| size \| A100 x 1 .*\n(?:\|.*\n)+)", readme.read_text())
    lines = lines.group(1).splitlines()
    headers = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert len(headers) == 8 and len(rows) == 7 and rows[-1][0] == "8 GiB"
    for row in rows:
        size = parse_size(row[0].replace(" ", ""))
        for header, cell in zip(headers, row[1:]):
            gpu, nodes = header.split(" x ")
            graph = graph_of(hardware.preset(f"dgx-{gpu.lower()}"), int(nodes))
            reduce, gather = cell.split(" · ")
            assert predict(graph, "all_reduce", size)[1].entry.label == reduce, (row[0], header)
            for collective in ("all_gather", "reduce_scatter"):
                assert predict(graph, collective, size)[1].entry.label == gather, (row[0], header)
