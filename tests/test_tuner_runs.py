"""A tuner file (NCCL's example tuner plugin's CSV) decides ``auto`` in a run as under
NCCL: `collsim run --tuner-config rules.csv` and ``Cluster(tuner=read_rules(path))``; a
rule that forces the tree below 64 KiB changes the choice there and nowhere else."""

import json

import pytest

import collsim
from collsim import hardware
from collsim.cli import main
from collsim.collectives.nccl_tuner_file import read_rules
from collsim.errors import ConfigError

RULES = (
    "# collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks\n"
    "allreduce,0,65535,tree,simple,-1,-1,-1\n"
)


def chosen(capsys, argv):
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    return {row["size_bytes"]: (row["algorithm"], row["protocol"]) for row in rows}


def test_run_with_a_tuner_file_forces_the_tree_below_64_kib_only(tmp_path, capsys):
    rules = tmp_path / "rules.csv"
    rules.write_text(RULES)
    sweep = [
        "run",
        "all-reduce",
        "--topology",
        "dgx-h100",
        "-b",
        "8",
        "-e",
        "1MiB",
        "-f",
        "4",
    ]  # 8 B .. 512 KiB
    sweep += ["--count-only", "--json"]
    plain = chosen(capsys, sweep)
    ruled = chosen(capsys, [*sweep, "--tuner-config", str(rules)])
    assert sorted(plain) == sorted(ruled) and len(plain) == 9  # 8 B .. 512 KiB
    for size in plain:
        if size < 64 * 1024:
            assert ruled[size] == ("double_tree", "simple") != plain[size]
        else:
            assert ruled[size] == plain[size]


def test_the_info_line_names_the_rule(tmp_path):
    rules = tmp_path / "rules.csv"
    rules.write_text(RULES)
    cluster = collsim.Cluster(hardware.topology("dgx-h100"), tuner=read_rules(rules))
    out = cluster.all_reduce(count=2, dtype="float32")
    assert out.algorithm == "double_tree"
    assert f"by tuner rule {rules}:2" in out.choice.info_line()


def test_the_environment_variable_works_as_under_nccl(tmp_path, capsys, monkeypatch):
    rules = tmp_path / "rules.csv"
    rules.write_text(RULES)
    monkeypatch.setenv("NCCL_TUNER_CONFIG_FILE", str(rules))
    argv = ["run", "all-reduce", "--topology", "dgx-h100", "-s", "1KiB", "--count-only", "--json"]
    assert chosen(capsys, argv) == {1024: ("double_tree", "simple")}


def test_a_bad_tuner_file_is_refused_before_the_run(tmp_path, capsys):
    rules = tmp_path / "rules.csv"
    rules.write_text("allreduce,0,10,tre,simple,-1,-1,-1\n")
    argv = ["run", "all-reduce", "--topology", "dgx-h100", "-s", "1KiB", "--count-only"]
    assert main([*argv, "--tuner-config", str(rules)]) == 2
    assert f"{rules}:1" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="read_rules"):
        collsim.Cluster(hardware.topology("dgx-h100"), tuner=str(rules))
