"""The wrong answers a student tried (issue 27), each with the diagnosis it deserves.

Every row is an answer written into a lesson's answer slot and the lesson run through
``collsim lesson N`` (``tests/lesson_runs.py``): the reply must name the cause (``said``:
every phrase), and must not give the misdiagnosis the old checker gave (``not_said``), nor
the correct value.  Rows of one lesson share a run when they answer different exercises.
"""

from collections import defaultdict
from dataclasses import dataclass

import pytest
from lesson_runs import copy_lessons, fill, lesson_path, run, slots, with_wrongs


@dataclass(frozen=True)
class Tried:
    lesson: int
    exercise: str
    answer: str  # Python source, as the student writes it in the slot
    said: tuple  # phrases the reply must contain
    not_said: tuple = ()  # what the checker used to say instead
    why: str = ""  # what the student did


TRIED = [
    # the misdiagnoses issue 27 lists
    Tried(
        6,
        "6.3",
        "256",
        ("the nearest power of two",),
        ("Decimal or binary", "1,024"),
        "a GPU count rounded to a power of two",
    ),
    Tried(
        10,
        "10.2",
        "4",
        ("dp = 8", "tp·pp = 8"),
        ("Bits or bytes",),
        "accumulation off by 8: dp taken as the world size",
    ),
    Tried(10, "10.2", "256", ("dp = 8",), ("Bits or bytes",), "accumulation 8x: dp forgotten"),
    Tried(
        4,
        "4.2",
        "lambda rank, step, k: rank - step",
        ("% k", "k = 4"),
        ("wrong sign",),
        "the chunk without % K",
    ),
    Tried(
        13,
        "13.3",
        "41.94e-6",
        ("α = 2 us", "too few"),
        ("Decimal or binary",),
        "n/β, the α forgotten (41.94/43.94 is 0.954)",
    ),
    Tried(
        5,
        "5.1",
        "2**20 / 100e9",
        ("α = 5 us", "too few"),
        ("Decimal or binary",),
        "n/β, the α forgotten",
    ),
    Tried(
        2,
        "2.3",
        "4",
        ("dp = 4", "accumulation = 4"),
        ("K = 4",),
        "the accumulation taken as more all-reduce bytes; dp = accumulation = 4",
    ),
    # the alternatives the lessons discuss, answered by name
    Tried(8, "8.1", "3 / 8", ("Narayanan",), (), "(p-1)/m"),
    Tried(8, "8.1", "27.27", ("a percentage",), (), "27.27 for 0.2727"),
    Tried(8, "8.4", "lambda p, m, v: (p - 1) / (v * m)", ("Narayanan",), (), "(p-1)/(v·m)"),
    Tried(10, "10.5", "32", ("Accelerate guide's formula",), (), "divided by tp again"),
    Tried(
        4,
        "4.2",
        "lambda rank, step, k: (rank - step - 1) % k",
        ("steps numbered from 0",),
        (),
        "0-based steps",
    ),
    Tried(11, "11.2", "3", ("counted from 1",), ("one too many",), "1-based position"),
    Tried(12, "12.7", "3", ("counted from 1",), ("one too many",), "1-based position"),
    # PAT against the ring in NCCL's model: the steps' ratio is the natural prediction
    Tried(
        12,
        "12.8",
        "63 / 6",
        ("the ratio of the step counts", "2.8 µs for every rank"),
        (),
        "log against linear steps, NCCL's per-rank term forgotten",
    ),
    Tried(
        12,
        "12.8",
        "890.4 / (8 + 6 * 14)",
        ("a full network hop a step",),
        (),
        "PAT's steps priced as the ring's",
    ),
    # off by exactly one of the exercise's quantities, named (the old checker: "N too few")
    Tried(
        1,
        "1.2",
        "lambda L, B, s, h, a: s * B * h * (34 + 5 * a * s / h)",
        ("L = 32",),
        ("% too low",),
        "one layer's activations",
    ),
    Tried(4, "4.1", "2 * 7 / 8 * 16 * 2**20", ("b = 4",), ("too few",), "elements, not bytes"),
    Tried(7, "7.1", "2 * 3 / 4 * 64 * 16", ("b = 8",), ("Bits or bytes",), "elements"),
    Tried(
        7,
        "7.3",
        "2 * 3 / 4 * 4 * 8 * 16 * 8",
        ("all-reduces = 2",),
        ("half",),
        "one all-reduce of the two",
    ),
    Tried(13, "13.1", "2 * 3 / 4 * 1024", ("b = 8",), ("Bits or bytes",), "elements"),
    Tried(3, "3.3", "820224 / 8", ("ranks = 8", "b = 8"), ("too few",), "one rank's bytes"),
    Tried(2, "2.1", "1", ("dp = 4",), ("too few",), "the mean, not the sum"),
    Tried(10, "10.3", "98", ("pp = 4",), ("too many",), "784 / 8: pp forgotten"),
    Tried(5, "5.2", "5e-6 * 100e9", ("K = 8",), ("too low",), "αβ, the K forgotten"),
    Tried(8, "8.3", "16", ("what GPipe holds",), (), "m, as GPipe"),
    Tried(10, "10.4", "800", ("the multiple above 784",), (), "the other multiple"),
    Tried(12, "12.2", '"24GB/s"', ("K = 8",), ("% too low",), "one NIC's rate"),
    # lesson 14: each exercise's natural wrong answer, named
    Tried(
        14,
        "14.1",
        "np.exp(2) / np.exp([2, 1, 0, -1]).sum()",
        ("the softmax over all four experts",),
        (),
        "the score before the gates are renormalised over the k chosen",
    ),
    Tried(14, "14.2", "8", ("one per chosen expert",), (), "Megatron-Core's k rows a token"),
    Tried(
        14,
        "14.2",
        "8 * (1 - (1 - 1 / 8) ** 8)",
        ("drawn with replacement",),
        (),
        "the with-replacement approximation",
    ),
    Tried(14, "14.3", "32 * 16 * 8", ("own experts counted too",), (), "the diagonal too"),
    Tried(14, "14.3", "17 * 16", ("b = 8",), ("Bits or bytes",), "values, not bytes"),
    Tried(14, "14.4", "0", ("a capacity from all 64 tokens",), (), "T as the whole batch"),
    Tried(14, "14.4", "8", ("rounded down",), ("one too many",), "floor, not ceil"),
    Tried(
        14,
        "14.7",
        "510 * 7392 / 370.8e9",
        ("over NVLink's rate",),
        (),
        "the NVLink rate for the leg that leaves the node",
    ),
    Tried(
        1,
        "1.1",
        "12 * 7e9",
        ("the optimizer states alone",),
        ("% too low",),
        "the optimizer states only",
    ),
    # lesson 13's stencil: the natural slips of a halo count
    Tried(13, "13.6", "2 * (14 + 10) * 8", ("four neighbours", "PROC_NULL"), (), "4 sides"),
    Tried(13, "13.6", "(12 + 8) * 8", ("corner cells",), (), "the block's edges, no corners"),
    Tried(13, "13.6", "14 + 10", ("b = 8",), (), "values, not bytes"),
]


def rounds():
    """Rows grouped into lesson runs, at most one row per exercise in a run."""
    grouped = defaultdict(list)
    for row in TRIED:
        taken = [r for r in grouped if r[0] == row.lesson]
        free = next(
            (r for r in taken if row.exercise not in {t.exercise for t in grouped[r]}),
            (row.lesson, len(taken)),
        )
        grouped[free].append(row)
    return grouped


ROUNDS = rounds()


@pytest.mark.parametrize("key", sorted(ROUNDS), ids=lambda k: f"lesson{k[0]}-run{k[1] + 1}")
def test_a_wrong_answer_gets_the_diagnosis_it_deserves(key, tmp_path):
    lesson, rows = key[0], ROUNDS[key]
    folder = copy_lessons(tmp_path)
    path = lesson_path(folder, lesson)
    found = slots(path)
    fill(path, {found[row.exercise].name: row.answer for row in rows})
    with_wrongs(path)
    done = run(folder, lesson, tmp_path / "progress.json")
    assert done.status == 0, done.output[-3000:]
    for row in rows:
        reply = " ".join(done.calls[row.exercise].printed.split())
        assert reply.startswith(f"Not yet. {row.exercise}:"), reply
        for phrase in row.said:
            assert phrase in reply, f"{row.exercise} ({row.why}): {phrase!r} not in {reply!r}"
        for phrase in row.not_said:
            assert phrase not in reply, f"{row.exercise} ({row.why}): said {phrase!r}: {reply}"
        assert "The answer is" not in reply, reply


def test_the_table_covers_every_misdiagnosis_and_alternative_the_issue_names():
    named = {(r.lesson, r.exercise) for r in TRIED}
    for needed in [
        (6, "6.3"),
        (10, "10.2"),
        (4, "4.2"),
        (13, "13.3"),
        (2, "2.3"),
        (8, "8.1"),
        (8, "8.4"),
        (10, "10.5"),
        (11, "11.2"),
        (12, "12.7"),
    ]:
        assert needed in named, needed
