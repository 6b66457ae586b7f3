"""NCCL's cost model (collsim/collectives/nccl_model.py) and `collsim tune`: the worked
values of issue 32, taken from NCCL's tuning.cc by hand (not from this code), its enable
rules, NCCL_ALGO/NCCL_PROTO filters, and the command a user runs."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import hardware
from collsim.cli import main
from collsim.collectives.nccl_filters import parse_nccl_list
from collsim.collectives.nccl_model import graph_of, predict, tune_table
from collsim.errors import ConfigError
from collsim.units import parse_size

H100, A100, PCIE = (hardware.preset(n) for n in ("dgx-h100", "dgx-a100", "pcie-8gpu"))


def latencies(graph, collective):
    return {
        e.label: round(e.latency_us, 1) for e in tune_table(graph, collective) if not e.disabled
    }


def test_one_nvlink_node_ring_and_nvls_latencies_are_nccls():
    # 6.6 + 14 x 0.6, 14.0 + 14 x 1.9, 8.4 + 14 x 3.4: 2(K-1) = 14 hops over NVLink; NVLS 25
    lat = latencies(graph_of(H100, nodes=1), "all_reduce")
    assert (lat["ring/ll"], lat["ring/ll128"], lat["ring/simple"]) == (15.0, 40.6, 56.0)
    assert lat["nvls/simple"] == 25.0


def test_64_single_gpu_nodes_all_gather_ring_and_pat_latencies_are_nccls():
    # ring: 8.4 + 63 x 14 (every hop crosses the network); PAT: 8 + log2(64) x 14/3.5 + 64 x 2.8
    lat = latencies(graph_of(H100, nodes=64, gpus_per_node=1), "all_gather")
    assert (lat["ring/simple"], lat["pat/simple"]) == (890.4, 211.2)


def test_tune_prints_the_worked_values():
    out = run_tune("all-reduce", "--topology", "dgx-h100", "--size", "1MiB")
    ring = re.search(r"#\s+ring\s+([\d.]+)/.*?([\d.]+)/.*?([\d.]+)/", out.text)
    assert ring.groups() == ("15.0", "40.6", "56.0")
    assert re.search(r"#\s+nvls\s+off\s+off\s+25\.0/", out.text)
    out = run_tune("all-gather", "--nodes", "64", "--gpus-per-node", "1", "--size", "64KiB")
    assert re.search(r"#\s+ring\s+[\d.]+/.*?[\d.]+/.*?890\.4/", out.text)
    assert re.search(r"#\s+pat\s+off\s+off\s+211\.2/", out.text)
    assert re.search(r"64 KiB\s+pat/simple", out.text)  # PAT's log latency wins small sizes


@pytest.mark.parametrize(
    "machine, nodes, per, collective, pair, reason",
    [
        (H100, 1, None, "all_gather", "pat/simple", "one GPU per node"),
        (H100, 1, None, "all_reduce", "nvls_tree/simple", "across nodes only"),
        (A100, 2, None, "all_reduce", "nvls/simple", "no NVLink SHARP"),
        (H100, 2, None, "all_reduce", "nvls/simple", "needs CollNet"),
        (H100, 1, None, "all_reduce", "collnet_direct/simple", "needs CollNet"),
        (H100, 1, None, "all_reduce", "nvls/ll", "Simple only"),
        (PCIE, 1, None, "all_reduce", "ring/ll128", "only over NVLink"),
    ],
)
def test_enable_rules_say_why(machine, nodes, per, collective, pair, reason):
    entries = {e.label: e for e in tune_table(graph_of(machine, nodes, per), collective)}
    assert reason in entries[pair].disabled


def test_collnet_direct_needs_nvswitch_and_collnet_on():
    on_pcie = {e.label: e for e in tune_table(graph_of(PCIE, 2, collnet=True), "all_reduce")}
    assert "NVSwitch" in on_pcie["collnet_direct/simple"].disabled
    assert not on_pcie["collnet_chain/simple"].disabled
    on_dgx = {e.label: e for e in tune_table(graph_of(H100, 2, collnet=True), "all_reduce")}
    assert not on_dgx["collnet_direct/simple"].disabled


def test_only_the_algorithms_nccl_runs_for_each_collective_are_modelled():
    assert {e.algorithm for e in tune_table(graph_of(H100), "broadcast")} == {"ring"}
    assert "pat" not in {e.algorithm for e in tune_table(graph_of(H100), "all_reduce")}
    assert "tree" not in {e.algorithm for e in tune_table(graph_of(H100), "all_gather")}


def test_small_sizes_pay_latency_large_sizes_bandwidth():
    graph = graph_of(A100, nodes=4)
    small = predict(graph, "all_reduce", 8)[1].entry
    large = predict(graph, "all_reduce", 8 * 2**30)[1].entry
    assert (small.algorithm, small.protocol) == ("tree", "ll")  # least latency
    assert (large.algorithm, large.protocol) == ("ring", "simple")  # most bandwidth


@given(
    machine=st.sampled_from([H100, A100, PCIE]),
    nodes=st.integers(1, 32),
    collective=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "broadcast"]),
    log_size=st.integers(0, 33),
)
def test_the_choice_is_the_least_predicted_time_and_time_grows_with_size(
    machine, nodes, collective, log_size
):
    graph = graph_of(machine, nodes)
    predictions, winner = predict(graph, collective, 2**log_size)
    timed = [p.time_us for p in predictions if p.time_us is not None]
    assert winner.time_us == min(timed)
    bigger, _ = predict(graph, collective, 2 ** (log_size + 1))
    for now, then in zip(predictions, bigger):
        if now.time_us is not None:
            assert then.time_us > now.time_us


def test_nccl_algo_filters_with_per_collective_prefixes():
    allowed = parse_nccl_list("ring,tree;allreduce:tree", "algorithm")
    assert allowed["all_reduce"] == {"tree"} and allowed["broadcast"] == {"ring", "tree"}
    assert parse_nccl_list("^ll128", "protocol")["all_gather"] == {"ll", "simple"}
    assert parse_nccl_list("NVLSTree,CollnetDirect", "algorithm")["reduce"] == {
        "nvls_tree",
        "collnet_direct",
    }
    with pytest.raises(ConfigError, match="did you mean 'ring'"):
        parse_nccl_list("rnig", "algorithm")
    with pytest.raises(ConfigError, match="no prefix"):
        parse_nccl_list("ring;tree", "algorithm")
    with pytest.raises(ConfigError, match="did you mean 'allreduce'"):
        parse_nccl_list("allredcue:ring", "algorithm")


def test_a_filter_changes_the_choice_only_where_it_applies(monkeypatch):
    base = run_tune(
        "all-reduce", "--topology", "dgx-a100", "--nodes", "4", "-b", "8", "-e", "8G", "-f", "64"
    )
    forced = run_tune(
        "all-reduce",
        "--topology",
        "dgx-a100",
        "--nodes",
        "4",
        "-b",
        "8",
        "-e",
        "8G",
        "-f",
        "64",
        "--algo",
        "ring",
    )
    assert "tree/" in base.choices() and "tree/" not in forced.choices()
    monkeypatch.setenv("NCCL_PROTO", "simple")
    from_env = run_tune("all-reduce", "--topology", "dgx-a100", "--size", "8")
    assert set(from_env.choices().split()) == {"ring/simple"}
    monkeypatch.setenv("NCCL_ALGO", "allgather:ring")  # a prefix for another collective
    assert (
        "tree/"
        in run_tune("all-reduce", "--topology", "dgx-a100", "--nodes", "2", "--size", "8").choices()
    )


def test_simulate_marks_collsims_fastest_beside_nccls_choice():
    out = run_tune(
        "all-reduce",
        "--topology",
        "dgx-a100",
        "--nodes",
        "2",
        "-b",
        "8",
        "-e",
        "8G",
        "-f",
        "1024",
        "--simulate",
    )
    rows = [
        line.split() for line in out.text.splitlines() if re.match(r"\s+[\d.]+ [KMG]?i?B\s", line)
    ]
    assert len(rows) == 4
    for row in rows:  # e.g. ['8', 'B', 'tree/ll', '25.2', 'us', 'tree/ll', '23.2', 'us']
        assert row[5] in (
            "tree/ll",
            "tree/ll128",
            "tree/simple",
            "ring/ll",
            "ring/ll128",
            "ring/simple",
        )
    assert rows[-1][2] == rows[-1][5] == "ring/simple"  # 8 GiB: both say bandwidth wins


@pytest.mark.parametrize(
    "argv, names",
    [
        (["all-to-all"], "'all-to-all'"),
        (["all-reduce", "--topology", "ring"], "'ring'"),
        (["all-reduce", "--gpus-per-node", "9"], "--gpus-per-node 9"),
        (["all-reduce", "--algo", "rign"], "did you mean 'ring'"),
        (["all-reduce", "--proto", "LL256"], "did you mean 'll128'"),
        (["all-reduce", "--nodes", "0"], "--nodes"),
        (["all-reduce", "--size", "1MiB", "-b", "8"], "one size or a sweep"),
    ],
)
def test_bad_input_is_refused_with_exit_2(argv, names, capsys):
    assert main(["tune", *argv]) == 2
    assert names in capsys.readouterr().err


def test_a_machine_file_sets_compute_capability_and_cpu_vendor():
    machine = hardware.loads('base = "dgx-a100"\ncompute_capability = 90\ncpu_vendor = "intel"')
    graph = graph_of(machine, nodes=2)
    assert (graph.architecture, graph.cpu_vendor) == ("hopper", "intel")
    with pytest.raises(ConfigError, match="compute_capability 85"):
        hardware.loads('base = "dgx-a100"\ncompute_capability = 85')
    with pytest.raises(ConfigError, match="cpu_vendor 'arm64'"):
        hardware.loads('base = "dgx-a100"\ncpu_vendor = "arm64"')


class Output:
    def __init__(self, text):
        self.text = text

    def rows(self):
        """``[(size, NCCL's choice)]``, one per size row."""
        return re.findall(r"^\s+([\d.]+ [KMG]?i?B)\s+(\S+)", self.text, flags=re.M)

    def choices(self):
        """The 'NCCL chooses' column of every size row."""
        return " ".join(choice for _, choice in self.rows())


def run_tune(*argv):
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["tune", *argv]) == 0
    return Output(buffer.getvalue())


def test_a_tuner_file_forcing_tree_below_64_kib_changes_the_choice_there_only(tmp_path):
    rules = tmp_path / "rules.csv"
    rules.write_text(
        "# collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks\n"
        "allreduce,0,65535,tree,simple,-1,-1,-1\n"
        "allgather,0,65535,tree,simple,-1,-1,-1\n"  # no tree for all-gather: never applies
    )
    sweep = ["--topology", "dgx-h100", "-b", "8", "-e", "8G", "-f", "2"]
    plain = run_tune("all-reduce", *sweep).rows()
    ruled = run_tune("all-reduce", *sweep, "--tuner-config", str(rules)).rows()
    assert len(plain) == len(ruled) == 31
    for (size, before), (_, after) in zip(plain, ruled):
        if parse_size(size) < 64 * 1024:
            assert after == "tree/simple" != before
        else:
            assert after == before
    gathers = run_tune("all-gather", *sweep, "--tuner-config", str(rules)).rows()
    assert gathers == run_tune("all-gather", *sweep).rows()


def test_tuner_rules_match_nodes_and_ranks_and_the_first_match_wins(tmp_path, monkeypatch):
    rules = tmp_path / "rules.csv"
    rules.write_text(
        "allreduce,0,1000,ring,ll128,-1,4,-1\n"  # 4 nodes only
        "allreduce,0,1000,ring,simple,-1,-1,16\n"  # 16 ranks only
        "allreduce,0,1000,ring,ll,-1,-1,-1\n"
    )
    monkeypatch.setenv("NCCL_TUNER_CONFIG_FILE", str(rules))
    on = {
        n: run_tune("all-reduce", "--topology", "dgx-a100", "--nodes", n, "--size", "8").rows()[0][
            1
        ]
        for n in ("1", "2", "4")
    }
    assert on == {"1": "ring/ll", "2": "ring/simple", "4": "ring/ll128"}


@pytest.mark.parametrize(
    "line, names",
    [
        ("allreduce,0,10,tree", "4 fields"),
        ("allreduse,0,10,tree,simple,-1,-1,-1", "did you mean 'allreduce'"),
        ("allreduce,0,10,tre,simple,-1,-1,-1", "did you mean 'tree'"),
        ("allreduce,0,10,tree,LL12,-1,-1,-1", "did you mean 'll128'"),
        ("allreduce,10,0,tree,simple,-1,-1,-1", "min_bytes 10 .. max_bytes 0"),
        ("allreduce,0,1k,tree,simple,-1,-1,-1", "max_bytes '1k'"),
    ],
)
def test_a_bad_tuner_line_is_refused_naming_file_and_line(tmp_path, capsys, line, names):
    rules = tmp_path / "rules.csv"
    rules.write_text(f"# header\n{line}\n")
    assert main(["tune", "all-reduce", "--tuner-config", str(rules)]) == 2
    err = capsys.readouterr().err
    assert names in err and f"{rules}:2" in err


def test_the_choice_map_draws_the_models_choice_in_every_cell(tmp_path, monkeypatch):
    import collsim.viz.output as output

    drawn = {}
    real = output.save_figure

    def keep(fig, out, fmt, **kwargs):
        drawn["fig"] = fig
        return real(fig, out, fmt, **kwargs)

    monkeypatch.setattr(output, "save_figure", keep)
    out = tmp_path / "map.png"
    argv = ["--topology", "dgx-a100", "--nodes", "4", "-b", "8", "-e", "8G", "-f", "64"]
    assert main(["tune", "all-reduce", *argv, "--map", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = drawn["fig"].axes
    cells = [t.get_text().replace("\n", "/") for t in ax.texts]
    sizes = [8 * 64**i for i in range(6)]
    want = [
        predict(graph_of(A100, nodes), "all_reduce", s)[1].entry.label
        for nodes in (1, 2, 4)
        for s in sizes
    ]
    names = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
    assert cells == [f"{a}/{names[p]}" for a, p in (w.split("/") for w in want)]


def test_the_choice_map_refuses_a_single_size_and_a_bad_file_name(tmp_path, capsys):
    assert main(["tune", "all-reduce", "--size", "1MiB", "--map", str(tmp_path / "m.png")]) == 2
    assert main(["tune", "all-reduce", "--map", str(tmp_path / "m.jpg")]) == 2
    assert ".png, .svg or .pdf" in capsys.readouterr().err
