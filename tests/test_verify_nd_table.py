"""`collsim verify nd` over every mesh of sizes 1 and 2 (issue 25, item 2).

The model ``verify`` built for tp > 1 used to be tensor parallel only: with cp × tp it ran
no context parallelism (0 B along cp, MISMATCH against one device).  Here every
(dp_replicate, dp_shard, cp, tp, pp) ∈ {1, 2}⁵ goes through :func:`verify_context`, the
function behind the CLI, with both cp variants and layouts, and a few rows through the CLI
itself: each equals one device, and each rank's cp bytes equal the one closed form,
:func:`~collsim.parallel.context.formulas.context_parallel_bytes`.
"""

import itertools

import pytest
from fuzzkit import run_cli

from collsim.parallel.context.formulas import context_parallel_bytes
from collsim.verify.context import verify_context

MESHES = list(itertools.product((1, 2), repeat=5))  # (dp_replicate, dp_shard, cp, tp, pp)
SMALL = dict(hidden=8, heads=4, seq=8, layers=2, steps=1)  # a second per whole table
B = 8  # bytes per element: the float64 arrays compared


def _row(replicate, shard, cp, tp, pp, variant, layout):
    return verify_context(
        "nd",
        dp_replicate=replicate,
        dp_shard=shard,
        cp=cp,
        tp=tp,
        pp=pp,
        variant=variant,
        layout=layout,
        **SMALL,
    )


@pytest.mark.parametrize("layout", ["balanced", "contiguous"])
@pytest.mark.parametrize("variant", ["ring", "all-to-all"])
def test_every_mesh_of_ones_and_twos_matches_one_device_with_its_cp_bytes(variant, layout):
    assert len(MESHES) == 32
    for replicate, shard, cp, tp, pp in MESHES:
        report = _row(replicate, shard, cp, tp, pp, variant, layout)
        f, mesh = report.context, (replicate, shard, cp, tp, pp)
        assert report.match is True and report.max_rel_diff < 1e-9, mesh
        assert len(report.bytes_sent) == replicate * shard * cp * tp * pp
        # the micro-batch: 2 samples per data-parallel rank, one micro-batch per stage
        closed = context_parallel_bytes(
            variant,
            batch=2,
            seq=8,
            hidden=8,
            cp=cp,
            bytes_per_element=B,
            tp=tp,
            layers=2 // pp,
            microbatches=pp,
            steps=1,
        )
        assert f.cp_bytes_per_rank == [closed] * len(report.bytes_sent), mesh
        assert f.formula_cp_bytes == f.cp_bytes_per_rank, mesh
        if cp > 1:  # measured along the cp groups, by the variant's collective
            assert closed > 0 and f.cp_collective == ("send" if variant == "ring" else "all_to_all")
            assert report.bytes_by_group[("cp", f.cp_collective)] == f.cp_bytes_per_rank
            assert min(f.attention_flops_per_rank) > 0, mesh
        else:
            assert not any(dim == "cp" for dim, _ in report.bytes_by_group), mesh


def test_the_closed_form_counts_blocks_of_the_ranks_heads():
    # ring, per layer: 3cp−2 blocks of K and V, each 2·B·(S/cp)·(D/tp)·b
    for cp, tp in ((2, 1), (2, 2), (4, 2)):
        block = 2 * 2 * (16 // cp) * (8 // tp) * B
        got = context_parallel_bytes(
            "ring", batch=2, seq=16, hidden=8, cp=cp, bytes_per_element=B, tp=tp
        )
        assert got == (3 * cp - 2) * block
    # all-to-all, per layer: (cp−1)/cp of 4 activations of B·(S/cp)·(D/tp)·b, each pass
    a2a = context_parallel_bytes(
        "all-to-all", batch=2, seq=16, hidden=8, cp=2, bytes_per_element=B, tp=2, layers=3
    )
    assert a2a == 3 * 2 * 4 * (2 * 8 * 4 * B) // 2


@pytest.mark.parametrize(
    "flags",
    [
        ["--cp", "2", "--tp", "2"],
        ["--cp", "2", "--tp", "2", "--layout", "contiguous", "--no-causal"],
        ["--dp-replicate", "2", "--dp-shard", "2", "--cp", "2", "--tp", "2"],
        ["--dp-shard", "2", "--cp", "2", "--tp", "2", "--pp", "2", "--variant", "all-to-all"],
    ],
    ids=lambda flags: " ".join(flags),
)
def test_the_cli_prints_match_and_cp_bytes_equal_to_the_closed_form(flags):
    outcome = run_cli(["verify", "nd", *flags, "--steps", "1"])
    assert outcome.status == 0, outcome
    text = outcome.stdout
    assert "): MATCH" in text and "MISMATCH" not in text
    sizes = dict(zip(flags[::2], flags[1::2], strict=False))
    cp, tp, pp = (int(sizes.get(k, 1)) for k in ("--cp", "--tp", "--pp"))
    variant = sizes.get("--variant", "ring")
    dp = int(sizes.get("--dp-replicate", 1)) * int(sizes.get("--dp-shard", 1))
    closed = context_parallel_bytes(
        variant,
        batch=2,
        seq=8,
        hidden=16,
        cp=cp,
        bytes_per_element=B,
        tp=tp,
        layers=2 // pp,
        microbatches=pp,
        steps=1,
    )
    shown = f"{closed / 1024:g} KiB ({closed:,} B)"
    rows = [line for line in text.splitlines() if line.startswith("    rank ")]
    cp_rows = [line for line in rows if "formula" in line]
    assert len(cp_rows) == dp * cp * tp * pp
    for line in cp_rows:
        assert line.count(shown) == 2 and line.endswith(": equal"), line
    assert f"D = hidden/tp = {16 // tp}" in text
