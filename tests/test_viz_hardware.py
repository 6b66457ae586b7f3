"""The pictures on the hardware presets: every link of the machine drawn, NCCL's algorithms
in the sweep."""

import pytest

import collsim
from collsim import hardware
from collsim.viz.sweep import sweep, sweep_figure
from collsim.viz.traffic import topology_layout, traffic_figure


@pytest.mark.parametrize("name", sorted(hardware.PRESETS))
@pytest.mark.parametrize("nodes", [1, 2])
def test_traffic_draws_every_link_of_a_preset(name, nodes):
    g = hardware.topology(name, nodes)
    result = collsim.Cluster(g).all_reduce(count=1 << 12, dtype="float32")
    fig = traffic_figure(g, result)
    drawn = [p for p in fig.axes[0].patches if (p.get_gid() or "").startswith("link")]
    assert len(drawn) == g.number_of_edges()
    pos = topology_layout(g)
    assert set(pos) == set(g.nodes)
    per = hardware.preset(name).gpus_per_node
    assert all(pos[r][1] == 0.0 for r in range(per * nodes))  # the GPUs in one row
    assert all(pos[f"rail{j}"][1] < 0 for j in range(8) if f"rail{j}" in g)  # rails below


def test_a_sweep_on_a_preset_compares_ncclss_algorithms_too():
    cluster = collsim.Cluster(hardware.topology("dgx-h100"))
    result = sweep(cluster, "all_reduce", sizes=[1 << 10, 1 << 24])
    assert {"nccl_ring", "double_tree", "hierarchical", "nvls"} <= set(result.times)
    assert sweep_figure(cluster, data=result).axes
    generic = sweep(collsim.Cluster(collsim.topology.switch(8)), "all_reduce", sizes=[1 << 10])
    assert set(generic.times) == {"ring", "tree", "halving_doubling", "naive"}
