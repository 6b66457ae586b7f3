"""Hardware presets, machine files and the topologies they build (collsim.hardware).

Three layers, as everywhere: the numbers are the cited ones; the graph has the right
structure (who is wired to whom, at which rate, by which class of link); and properties over
node counts hold for every preset.
"""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import hardware
from collsim.errors import ConfigError
from collsim.hardware.build import topology
from collsim.topology import check_topology, path_alpha_beta, ranks_of, route

GB = 1e9
NAMES = sorted(hardware.PRESETS)


# -- the cited numbers ----------------------------------------------------------------


def test_nvlink_rates_are_the_vendors_and_ncclss_effective_ones():
    a100, h100 = hardware.preset("dgx-a100"), hardware.preset("dgx-h100")
    assert a100.intra.per_gpu_rate == 300 * GB  # 12 NVLink3 x 25 GB/s per direction
    assert h100.intra.per_gpu_rate == 450 * GB  # 18 NVLink4 x 25 GB/s
    assert a100.intra.effective_rate == pytest.approx(12 * 20.0 * GB)  # NCCL SM80_NVLINK_BW
    assert h100.intra.effective_rate == pytest.approx(18 * 20.6 * GB)  # NCCL SM90_NVLINK_BW
    assert a100.inter.nic_rate == 25 * GB  # HDR 200 Gbit/s
    assert h100.inter.nic_rate == 50 * GB  # NDR 400 Gbit/s
    assert h100.intra.reduces and not a100.intra.reduces  # NVLink SHARP is Hopper's


@pytest.mark.parametrize("name", NAMES)
def test_every_preset_cites_its_sources_and_describes_itself(name):
    machine = hardware.preset(name)
    assert len(machine.sources) >= 2
    text = machine.describe()
    assert machine.name in text and "GB/s" in text and "TFLOP/s" in text


# -- the graphs -----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_every_gpu_pair_has_a_route_with_classed_links(name, nodes):
    g = topology(name, nodes)
    per = hardware.preset(name).gpus_per_node
    assert check_topology(g) == per * nodes
    for u, v, data in g.edges(data=True):
        assert data["link_class"] in ("nvlink", "pcie", "cpu", "net")
        assert data["bandwidth"] <= data["line_rate"]
        assert g.has_edge(v, u)  # every link is full duplex
    for rank in ranks_of(g):
        assert g.nodes[rank]["node"] == rank // per and g.nodes[rank]["local"] == rank % per
    for src in (0, per * nodes - 1):
        for dst in ranks_of(g):
            if dst != src:
                assert route(g, src, dst)


@pytest.mark.parametrize("name", ["dgx-a100", "dgx-h100"])
def test_nvswitch_inside_a_node_and_rails_between(name):
    g = topology(name, 2)
    machine = hardware.preset(name)
    classes = [g.edges[e]["link_class"] for e in route(g, 0, 5)]
    assert classes == ["nvlink", "nvlink"]
    assert path_alpha_beta(g, 0, 5)[1] == pytest.approx(machine.intra.effective_rate)
    # GPU j of one node reaches GPU j of the next through rail j only
    assert route(g, 3, 11) == [(3, "rail3"), ("rail3", 11)]
    assert path_alpha_beta(g, 3, 11)[1] == pytest.approx(machine.inter.effective_rate)
    # another rail: through NVLink to the GPU on the right rail (NCCL's PXN), not the spine
    classes = [g.edges[e]["link_class"] for e in route(g, 3, 8)]
    assert classes.count("net") == 2 and "spine" not in {n for e in route(g, 3, 8) for n in e}


def test_pcie_box_shares_host_bridges_and_crosses_sockets():
    g = topology("pcie-8gpu")
    assert [n for e in route(g, 0, 1) for n in e] == [0, "pcie0.0", "pcie0.0", 1]
    across = route(g, 0, 7)  # GPU 0 on socket 0, GPU 7 on socket 1
    assert ("cpu0.0", "cpu0.1") in across
    # the GPUs of one PCIe switch share its one x16 uplink to the CPU
    assert g.edges["pcie0.0", "cpu0.0"]["bandwidth"] == g.edges[0, "pcie0.0"]["bandwidth"]


@given(nodes=st.integers(1, 6), name=st.sampled_from(NAMES))
def test_link_counts_follow_the_machine(nodes, name):
    machine = hardware.preset(name)
    g = topology(machine, nodes)
    nics = [(u, v) for u, v, c in g.edges(data="link_class") if c == "net"]
    if nodes == 1:
        assert nics == []
    else:
        rail = machine.inter.fabric == "rail"
        per_node = machine.inter.nics * nodes
        # NIC links both ways, plus each rail's two-way uplink to the spine
        assert len(nics) == 2 * per_node + (2 * machine.inter.nics if rail else 0)


def test_bad_node_counts_and_names_are_refused_by_value():
    with pytest.raises(ConfigError, match="nodes 0"):
        topology("dgx-a100", 0)
    with pytest.raises(ConfigError, match="did you mean 'dgx-h100'"):
        hardware.preset("dgx-h10")


# -- machine files --------------------------------------------------------------------


def test_a_toml_file_starting_from_a_preset_changes_only_what_it_names(tmp_path):
    path = tmp_path / "box.toml"
    path.write_text(
        'base = "dgx-a100"\nname = "a100-4nic"\n[inter]\nnics = 4\n'
        'nic_rate = "400Gbit/s"\nfabric = "switch"\n'
    )
    machine = hardware.load(path)
    assert (machine.name, machine.inter.nics, machine.inter.nic_rate) == ("a100-4nic", 4, 50 * GB)
    assert machine.intra == hardware.preset("dgx-a100").intra
    g = topology(machine, 2)
    assert "fabric" in g and route(g, 0, 8)[1][0] == "fabric"


def test_a_json_file_with_every_field(tmp_path):
    spec = {
        "name": "tiny",
        "gpu": "toy",
        "gpus_per_node": 2,
        "compute_rate": "10TFLOP/s",
        "intra": {
            "kind": "nvswitch",
            "link_rate": "10GB/s",
            "links": 2,
            "efficiency": 0.5,
            "latency": "1us",
        },
        "inter": {"nics": 1, "nic_rate": "1GB/s", "latency": "2us", "fabric": "rail"},
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(spec))
    machine = hardware.load(path)
    assert machine.intra.effective_rate == 10 * GB and machine.compute_rate == 10e12
    g = topology(machine, 3)
    assert path_alpha_beta(g, 0, 1) == (pytest.approx(2e-6), pytest.approx(10 * GB))


@pytest.mark.parametrize(
    "text, bad",
    [
        ('base = "dgx-a100"\n[intra]\nlinkz = 3\n', "linkz"),
        ('base = "dgx-a100"\n[intra]\nefficiency = 1.5\n', "1.5"),
        ('base = "dgx-a100"\n[inter]\nnic_rate = "fast"\n', "fast"),
        ('base = "dgx-a100"\n[inter]\nfabric = "torus"\n', "torus"),
        ('base = "dgx-a1000"\n', "dgx-a1000"),
        ('name = "x"\n', "missing"),
        ("name = \n", "TOML"),
    ],
)
def test_bad_machine_files_name_the_bad_value(tmp_path, text, bad):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=bad):
        hardware.load(path)


def test_a_file_that_is_not_a_machine_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"\.toml or \.json"):
        hardware.load(tmp_path / "box.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        hardware.load(tmp_path / "missing.toml")


# -- the command line -----------------------------------------------------------------


def test_collsim_hardware_lists_and_shows_machines(capsys):
    from collsim.cli import main

    assert main(["hardware"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in NAMES)
    assert main(["hardware", "dgx-h100", "--nodes", "2"]) == 0
    shown = capsys.readouterr().out
    assert "gpu-nvswitch" in shown and "rail-spine" in shown and "370.8 GB/s" in shown
    assert "SM90_NVLINK_BW" in shown  # the sources are printed
    assert main(["hardware", "dgx-h10"]) == 2
    assert "did you mean 'dgx-h100'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, bad",
    [
        (["--topology", "dgx-a100", "--ranks", "12"], "nearest valid --ranks 16"),
        (["--topology", "ring", "--nodes", "2"], "--nodes 2"),
        (["--topology", "dgx-h100", "--protocol", "LL256"], "LL256"),
        (["--topology", "dgx-a10"], "did you mean 'dgx-a100'"),
        (["--topology", "dgx-a100", "--nodes", "0"], "--nodes 0"),
    ],
)
def test_cluster_flags_on_presets_are_checked_by_value(capsys, argv, bad):
    from collsim.cli import main

    assert main(["run", "all-reduce", "--count-only", *argv]) == 2
    assert bad in capsys.readouterr().err


def test_a_preset_run_takes_its_ranks_from_the_nodes(capsys):
    from collsim.cli import main

    assert (
        main(
            [
                "run",
                "all-reduce",
                "--topology",
                "dgx-a100",
                "--nodes",
                "2",
                "--count-only",
                "--size",
                "1MiB",
                "--json",
            ]
        )
        == 0
    )
    row = json.loads(capsys.readouterr().out)["results"][0]
    assert row["ranks"] == 16 and row["topology"] == "dgx-a100x2"


def test_a_cluster_on_a_preset_computes_at_its_gpus_rate():
    import collsim

    h100 = collsim.Cluster(topology("dgx-h100"))
    assert h100.compute_rate == 989e12
    assert h100.protocol == "auto"  # and picks NCCL's protocol by size, as NCCL does
    generic = collsim.Cluster(collsim.topology.ring(4))
    assert generic.compute_rate == 100e12 and generic.protocol is None
    assert collsim.Cluster(topology("dgx-h100"), compute_rate="1TFLOP/s").compute_rate == 1e12


def test_the_planner_reads_a_machines_rates_and_flags_override_them(capsys):
    from collsim.cli import main

    argv = [
        "plan",
        "--params",
        "7B",
        "--tp",
        "8",
        "--world-size",
        "16",
        "--global-batch",
        "32",
        "--json",
    ]
    assert main([*argv, "--machine", "dgx-h100"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert config["intra_bandwidth"] == pytest.approx(18 * 20.6 * GB)
    assert config["inter_bandwidth"] == pytest.approx(47.0 * GB)  # 8 NICs for 8 GPUs
    # α as the simulator charges it: the two links' latency and NCCL's Simple latency
    assert config["intra_latency"] == pytest.approx(2 * 0.25e-6 + 3.4e-6)
    assert main([*argv, "--machine", "dgx-h100", "--intra-bandwidth", "100GB/s"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["intra_bandwidth"] == 100 * GB
    assert main([*argv, "--machine", "dgx-h1000"]) == 2
    assert "dgx-h1000" in capsys.readouterr().err
