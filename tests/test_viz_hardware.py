"""The pictures on the hardware presets: every link of the machine drawn, NCCL's algorithms
in the sweep."""

import pytest

import collsim
from collsim import hardware
from collsim.collectives.formulas import ALGORITHMS
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
    assert set(generic.times) == set(ALGORITHMS["all_reduce"])  # every generic one, no NCCL


@pytest.mark.parametrize("protocol", ["ll", "ll128", "simple"])
def test_utilization_counts_payload_and_hatches_the_protocols_latency(protocol):
    from collsim.viz.utilization import latency_intervals, utilization

    g = hardware.topology("dgx-a100")
    result = collsim.Cluster(g).all_reduce(
        count=1 << 22, dtype="float32", algorithm="ring", protocol=protocol
    )
    _, _, share = utilization(g, result.trace, bins=400)
    efficiency = hardware.PROTOCOLS[protocol].efficiency
    assert share.max() == pytest.approx(efficiency, rel=0.01)  # a busy link carries e of it
    waits = latency_intervals(g, result.trace)
    first = min(start for spans in waits.values() for start, _ in spans)
    longest = max(b - a for spans in waits.values() for a, b in spans)
    # each message waits the links' latency plus the protocol's own for NVLink
    assert first == 0.0
    assert longest == pytest.approx(
        2 * 0.25e-6 + hardware.PROTOCOLS[protocol].latency_for("nvlink")
    )
    if efficiency < 1:
        assert f"protocol {protocol}" in utilization_figure_text(g, result)


def utilization_figure_text(g, result):
    from collsim.viz.utilization import utilization_figure

    return "\n".join(ax.get_title() for ax in utilization_figure(g, result).axes)
