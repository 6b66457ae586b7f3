"""`collsim viz mesh` (issue 28, item 4): the groups it draws are the device mesh's groups,
numbered as Megatron-LM and Accelerate number ranks, on the nodes they sit on."""

import itertools

import pytest

from collsim import cli
from collsim.viz import output


def drawn(argv, monkeypatch, tmp_path):
    """The figure ``collsim viz mesh argv`` saves."""
    saved = []
    monkeypatch.setattr(output, "save_figure", lambda fig, *a, **k: saved.append(fig))
    assert cli.main(["viz", "mesh", *argv, "--out", str(tmp_path / "mesh.png")]) == 0
    return saved[0]


def drawn_groups(fig):
    """``{dim: sorted list of rank lists}`` from the cells' ids ("tp group 3 rank 7")."""
    groups = {}
    for artist in fig.findobj():
        gid = artist.get_gid() or ""
        if " group " in gid and " rank " in gid:
            dim, _, index, _, rank = gid.split()
            groups.setdefault(dim, {}).setdefault(int(index), []).append(int(rank))
    return {dim: sorted(sorted(g) for g in by.values()) for dim, by in groups.items()}


def megatron_groups(tp, cp, ep, dp, pp):
    """Megatron-LM's groups for order tp-cp-ep-dp-pp, written from the rule rather than
    from collsim's grid: rank = tp_i + tp·(cp_i + cp·(ep_i + ep·(dp_i + dp·pp_i)))."""
    sizes = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}
    names = ["tp", "cp", "ep", "dp", "pp"]  # fastest first

    def rank(coords):
        r, stride = 0, 1
        for n in names:
            r += coords[n] * stride
            stride *= sizes[n]
        return r

    groups = {}
    for dim in (n for n in names if sizes[n] > 1):
        others = [n for n in names if n != dim]
        found = []
        for values in itertools.product(*(range(sizes[n]) for n in others)):
            fixed = dict(zip(others, values))
            found.append(sorted(rank({**fixed, dim: i}) for i in range(sizes[dim])))
        groups[dim] = sorted(found)
    return groups


@pytest.mark.parametrize(
    "tp,cp,ep,dp,pp", [(2, 1, 1, 4, 2), (4, 2, 1, 2, 1), (2, 1, 2, 2, 2), (1, 1, 1, 8, 1)]
)
def test_the_drawn_groups_are_megatrons(tp, cp, ep, dp, pp, monkeypatch, tmp_path):
    argv = [f"--tp={tp}", f"--cp={cp}", f"--ep={ep}", f"--dp={dp}", f"--pp={pp}"]
    fig = drawn(argv, monkeypatch, tmp_path)
    assert drawn_groups(fig) == megatron_groups(tp, cp, ep, dp, pp)


def test_accelerates_order_splits_dp_into_replicate_and_shard(monkeypatch, tmp_path):
    argv = ["--order", "accelerate", "--dp", "4", "--dp-replicate", "2", "--tp", "2", "--pp", "1"]
    groups = drawn_groups(drawn(argv, monkeypatch, tmp_path))
    # torch's init_device_mesh((2, 2, 2), ("dp_replicate", "dp_shard", "tp")): tp fastest
    assert groups["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert groups["dp_shard"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert groups["dp_replicate"] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_nodes_are_marked_and_ranks_numbered(monkeypatch, tmp_path):
    fig = drawn(
        ["--tp", "2", "--dp", "4", "--pp", "2", "--gpus-per-node", "4"], monkeypatch, tmp_path
    )
    panels = len(fig.axes)
    assert panels == 3  # tp, dp, pp
    nodes = [a for a in fig.findobj() if (a.get_gid() or "").startswith("node ")]
    assert len(nodes) == 4 * panels  # 16 ranks on 4 nodes of 4 GPUs, in every panel
    numbers = [t.get_text() for t in fig.axes[0].texts if t.get_text().isdigit()]
    assert sorted(map(int, numbers)) == list(range(16))


@pytest.mark.parametrize(
    "argv,named",
    [
        (["--order", "nemo"], "megatron, accelerate"),
        (["--order", "accelerate", "--ep", "2"], "--order megatron"),
        (["--order", "accelerate", "--dp", "4", "--dp-replicate", "3"], "must divide --dp 4"),
        (["--dp-replicate", "2"], "--order accelerate"),
        (["--tp", "0"], "--tp 0"),
        (["--tp", "8", "--dp", "16"], "64"),
        (["--gpus-per-node", "two"], "'two'"),
    ],
)
def test_bad_meshes_are_refused_naming_the_value(argv, named, capsys, tmp_path):
    assert cli.main(["viz", "mesh", *argv, "--out", str(tmp_path / "m.png")]) == 2
    assert named in capsys.readouterr().err
