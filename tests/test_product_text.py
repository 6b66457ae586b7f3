"""What a reader sees never points at material they cannot open (issue 11, item 13).

The course material collsim teaches from is not part of the repository, so the product
(code, help texts, lessons, examples, README) names the topic and cites the primary source
(Megatron-LM, Accelerate, the ZeRO and Korthikanti papers) instead of "seed 004".
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ["collsim", "lessons", "examples", "benchmarks", "README.md", "CONTRIBUTING.md"]
# "seed 004", "seed 000's", "seed004_..." -- but not "seed 0" or "--seed 1", the random seed
COURSE_REFERENCE = re.compile(r"seed[\s_]*0\d\d|seeds/", re.IGNORECASE)


def product_files():
    for entry in PRODUCT:
        path = ROOT / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in {".py", ".md", ".toml"})


@pytest.mark.parametrize("path", list(product_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_to_the_course_material(path):
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if COURSE_REFERENCE.search(line)
    ]
    assert not hits, "name the topic and cite the primary source instead:\n" + "\n".join(hits)


def test_the_pattern_catches_what_it_must_and_spares_the_random_seed():
    assert COURSE_REFERENCE.search("batch 64 on dp=4 (seed 004)")
    assert COURSE_REFERENCE.search("examples/seed004_dp_batch64.py")
    assert not COURSE_REFERENCE.search("collsim verify dp --seed 0")
    assert not COURSE_REFERENCE.search("rng = np.random.default_rng(seed)")
