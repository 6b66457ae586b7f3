"""Context parallelism on the mesh trainer: dp x cp x pp, ring attention and all-to-all.

Each cp rank holds its tokens of every sample (in the balanced or contiguous layout); the
transformer blocks run attention across the cp group and everything else on local tokens;
the gradients are averaged over the data- and context-parallel ranks together. Every
variant, layout and mesh trains like one device over Adam steps, and the traffic stays in
the groups it belongs to.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from collsim.collectives.records import is_collective
from collsim.errors import ConfigError
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model

VARIANTS, LAYOUTS = ("ring", "all-to-all"), ("balanced", "contiguous")
MESHES = [(1, 2, 1), (2, 2, 1), (1, 4, 1), (1, 2, 2), (2, 2, 2)]  # (dp, cp, pp)


def run(dp, cp, pp, variant, layout, heads=4, seq=16, steps=2, seed=0):
    model = toy_model(layers=2, hidden=8, heads=heads, seed=seed)
    batches = [toy_batch(dp * 2, seq=seq, seed=seed + 1 + s) for s in range(steps)]
    config = ParallelConfig(
        dp=dp, cp=cp, pp=pp, microbatches=2, cp_variant=variant, cp_layout=layout
    )
    return train(model, batches, config, optimizer=Adam(1e-2, eps=1e-6))


@pytest.mark.parametrize("dp, cp, pp", MESHES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_layout_and_mesh_trains_like_one_device(variant, layout, dp, cp, pp):
    result = run(dp, cp, pp, variant, layout)
    assert result.match is True and result.max_error < 1e-10
    assert result.dp_replica_diff == 0.0  # every dp and cp rank holds the same parameters
    assert result.mesh.names == ("pp", "dp", "cp", "tp")


@pytest.mark.parametrize("variant", VARIANTS)
def test_traffic_stays_in_its_groups(variant):
    result = run(2, 2, 1, variant, "balanced", steps=1)
    mesh = result.mesh
    kinds = {}
    for t in result.trace.transfers:
        a, b = mesh.coords(t.src), mesh.coords(t.dst)
        differ = {name for name in mesh.names if a[name] != b[name]}
        label = t.tag.dim if is_collective(t.tag) else "cp"
        kinds.setdefault(label, set()).add(frozenset(differ))
    # attention moves only along cp; the gradient average spans dp and cp together
    assert kinds["cp"] == {frozenset({"cp"})}
    assert kinds["dp_cp"] <= {frozenset({"cp"}), frozenset({"dp"}), frozenset({"dp", "cp"})}
    expected = ("cp", "send") if variant == "ring" else ("cp", "all_to_all")
    assert expected in result.bytes_by_group and ("dp_cp", "all_reduce") in result.bytes_by_group


@given(
    cp=st.sampled_from([1, 2, 4]),
    dp=st.integers(1, 2),
    variant=st.sampled_from(VARIANTS),
    layout=st.sampled_from(LAYOUTS),
    seed=st.integers(0, 999),
)
def test_property_cp_meshes_match_one_device(cp, dp, variant, layout, seed):
    result = run(dp, cp, 1, variant, layout, steps=1, seed=seed)
    assert result.match, (cp, dp, variant, layout, result.max_error)


SHARDED = [
    dict(zero=1),
    dict(zero=2),
    dict(zero=3),
    dict(zero=3, prefetch="both"),
    dict(zero=3, dp_replicate=2),
]


@pytest.mark.parametrize("sharding", SHARDED, ids=str)
@pytest.mark.parametrize("variant", VARIANTS)
def test_zero_fsdp_and_hsdp_with_context_parallelism_train_like_one_device(variant, sharding):
    dp = 4 if sharding.get("dp_replicate") else 2
    model = toy_model(layers=2, hidden=8, heads=4)
    batches = [toy_batch(dp * 2, seq=16, seed=s) for s in (1, 2)]
    config = ParallelConfig(dp=dp, cp=2, cp_variant=variant, **sharding)
    result = train(model, batches, config, optimizer=Adam(1e-2, eps=1e-6))
    assert result.match is True and result.dp_replica_diff == 0.0
    if sharding["zero"] == 3:  # FSDP shards over dp_shard x cp, as Accelerate and Megatron do
        gathers = [
            t.tag.group
            for t in result.trace.transfers
            if is_collective(t.tag) and t.tag.collective == "all_gather"
        ]
        assert gathers


@pytest.mark.parametrize("replicate, shard, cp", [(1, 2, 2), (2, 2, 2), (2, 1, 4), (1, 4, 2)])
def test_groups_are_the_ones_accelerates_device_mesh_forms(replicate, shard, cp):
    """Accelerate's ParallelismConfig builds its mesh row-major over (dp_replicate, dp_shard,
    cp, tp); flattened groups join dims. The trainer's mesh gives the same groups."""
    dp = replicate * shard
    config = ParallelConfig(dp=dp, cp=cp, zero=3, dp_replicate=replicate)
    mesh = config.mesh()
    accel = np.arange(dp * cp).reshape(replicate, shard, cp)  # tp = 1
    assert sorted(g.ranks for g in mesh.groups("cp")) == sorted(
        tuple(int(x) for x in accel[r, s, :]) for r in range(replicate) for s in range(shard)
    )
    # FSDP's shard group spans dp_shard x cp ("dp_shard_cp"), HSDP's replicas dp_replicate
    from collsim.parallel.data.sharded import hsdp_groups
    from collsim.parallel.mesh_setup import _replica_group

    for rank in range(dp * cp):
        r, s, c = (int(v[0]) for v in np.nonzero(accel == rank))
        shard_group, replica_group = hsdp_groups(_replica_group(mesh, rank), shard * cp, rank)
        assert set(shard_group.ranks) == {int(x) for x in accel[r].ravel()}
        if replicate > 1:
            assert set(replica_group.ranks) == {int(x) for x in accel[:, s, c]}


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("variant", VARIANTS)
def test_context_with_tensor_parallelism_and_sequence_parallelism(variant, sp):
    model = toy_model(layers=2, hidden=8, heads=4)
    batches = [toy_batch(4, seq=16, seed=s) for s in (1, 2)]
    config = ParallelConfig(dp=2, cp=2, tp=2, sp=sp, cp_variant=variant)
    result = train(model, batches, config, optimizer=Adam(1e-2, eps=1e-6))
    assert result.match is True and result.tp_replica_diff == 0.0  # LayerNorms summed over tp
    sent = result.bytes_by_group
    assert ("tp", "reduce_scatter" if sp else "all_reduce") in sent


def test_what_context_parallelism_does_not_run_yet_is_refused_by_name():
    with pytest.raises(ConfigError, match="cp_variant='ulysses' is not one of ring, all-to-all"):
        ParallelConfig(cp=2, cp_variant="ulysses")
    with pytest.raises(ConfigError, match="cp_layout='zigzag' is not one of"):
        ParallelConfig(cp=2, cp_layout="zigzag")
    model = toy_model(layers=1, hidden=8, heads=2)
    with pytest.raises(ConfigError, match="6"):  # 6 tokens do not split into 2·cp = 4 chunks
        train(model, [toy_batch(2, seq=6)], ParallelConfig(cp=2))


@given(
    replicate=st.sampled_from([1, 2]),
    shard=st.sampled_from([1, 2]),
    cp=st.sampled_from([1, 2, 4]),
    tp=st.sampled_from([1, 2]),
    pp=st.sampled_from([1, 2]),
    sp=st.booleans(),
    variant=st.sampled_from(VARIANTS),
    seed=st.integers(0, 999),
)
def test_property_nd_meshes_up_to_16_ranks_match_one_device(
    replicate, shard, cp, tp, pp, sp, variant, seed
):
    dp = replicate * shard
    assume(dp * cp * tp * pp <= 16)
    sp = sp and tp > 1  # sequence parallelism lives inside tp
    sharding = dict(zero=3, dp_replicate=replicate) if shard > 1 else dict(dp_replicate=dp)
    config = ParallelConfig(
        dp=dp, cp=cp, tp=tp, pp=pp, microbatches=pp, cp_variant=variant, sp=sp, **sharding
    )
    model = toy_model(layers=2, hidden=16, heads=8, seed=seed)  # 8/tp heads divide by cp
    batches = [toy_batch(dp * pp, seq=16, hidden=16, seed=seed + 1)]
    result = train(model, batches, config, optimizer=Adam(1e-2, eps=1e-6))
    assert result.match, (config.dims, variant, result.max_error)
    assert result.dp_replica_diff == 0.0 and result.tp_replica_diff == 0.0


@pytest.mark.parametrize("pp, dp, cp, tp", [(1, 2, 2, 2), (2, 2, 2, 2), (2, 1, 4, 2), (1, 4, 2, 1)])
def test_groups_are_the_ones_megatrons_rank_generator_forms(pp, dp, cp, tp):
    """Megatron-LM orders ranks "tp-cp-ep-dp-pp" (tp fastest): rank = t + tp·(c + cp·(d +
    dp·p)). Its groups vary one coordinate and fix the rest; the trainer's mesh forms the
    same ones, and Accelerate's (dp_replicate, dp_shard, cp, tp) mesh is the same order."""
    mesh = ParallelConfig(dp=dp, cp=cp, tp=tp, pp=pp, microbatches=max(pp, 1)).mesh()

    def rank(p, d, c, t):
        return t + tp * (c + cp * (d + dp * p))

    coords = [
        (p, d, c, t) for p in range(pp) for d in range(dp) for c in range(cp) for t in range(tp)
    ]
    sizes = {"pp": pp, "dp": dp, "cp": cp, "tp": tp}
    for name, axis in (("tp", 3), ("cp", 2), ("dp", 1), ("pp", 0)):
        if name not in mesh.names:
            assert sizes[name] == 1  # a dimension of size 1 is left out of the mesh
            continue
        expected = set()
        for p, d, c, t in coords:
            group = []
            for i in range(sizes[name]):
                where = [p, d, c, t]
                where[axis] = i
                group.append(rank(*where))
            expected.add(tuple(group))
        assert {g.ranks for g in mesh.groups(name)} == expected, name


def test_the_ring_s_kv_blocks_in_flight_are_measured():
    """Beyond its own K and V (activations), a ring rank holds the block it is receiving and
    the one it received last step: two blocks of 2·B·(S/cp)·D elements at bf16 at the peak."""
    result = run(1, 4, 1, "ring", "balanced", steps=1)  # micro-batches of B = 1, S = 16, D = 8
    block = 2 * 1 * (16 // 4) * 8 * 2  # K and V, B·T·D elements each, 2 bytes
    for rank in range(4):
        held, peak = 0, 0
        for event in result.trace.memory:
            if event.rank == rank and event.name.endswith("K/V block"):
                held += event.nbytes
                peak = max(peak, held)
        assert peak == 2 * block and held == 0  # two at once, all released
