"""``collsim plan``: exit codes, --json keys, --search, --config, --help."""

import json

import pytest

from collsim import cli

CASE_784 = (
    "plan --world-size 784 --tp 8 --pp 4 --layers 96 --hidden 12288 --heads 96 "
    "--seq 2048 --global-batch 1536 --micro-batch 1"
).split()
SMALL = "--layers 4 --hidden 64 --heads 4 --seq 64 --global-batch 16 --micro-batch 2".split()


@pytest.fixture(autouse=True)
def only_our_commands(monkeypatch):
    # the other sub-commands are written concurrently; test ours through the real main()
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("plan", "viz"))


def run(argv, capsys):
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_invalid_configuration_exits_1_and_prints_the_report(capsys):
    status, out, _ = run(CASE_784, capsys)
    assert status == 1
    assert "INVALID" in out and "world_size" in out and "hint:" in out
    assert "GiB" in out and "GB/s" in out and "TFLOP/s" in out  # units everywhere


def test_valid_configuration_exits_0(capsys):
    status, out, _ = run(["plan", "--world-size", "8", "--tp", "2", "--pp", "2", *SMALL], capsys)
    assert status == 0 and "VALID" in out


def test_json_has_the_keys_of_the_issue(capsys):
    status, out, _ = run([*CASE_784, "--json"], capsys)
    assert status == 1
    data = json.loads(out)
    for key in (
        "valid",
        "violations",
        "warnings",
        "suggestions",
        "derived",
        "memory",
        "communication",
        "compute",
        "step_time_s",
    ):
        assert key in data
    assert data["valid"] is False
    assert set(data["violations"][0]) == {"rule", "message", "hint"}
    assert {"dp", "accumulation"} <= set(data["derived"])
    parts = {"params", "grads", "optimizer", "activations", "total", "activations_per_layer"}
    assert parts <= set(data["memory"])
    assert {"tp", "dp", "pp", "cp", "total"} <= set(data["communication"])
    assert data["communication"]["dp"]["bytes_per_rank"] > 0
    first = data["suggestions"][0]
    assert first["changes"]["world_size"] == {"from": 784, "to": 768}
    assert first["config"]["world_size"] == 768


def test_bad_flags_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([*CASE_784, "--zero", "7"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_bad_values_exit_2_with_a_message_naming_them(capsys):
    status, _, err = run(["plan", "--tp", "2"], capsys)
    assert status == 2 and "params" in err and "layers" in err
    status, _, err = run(["plan", "--params", "7B", "--gpu-memory", "eighty"], capsys)
    assert status == 2 and "gpu_memory" in err and "'eighty'" in err


def test_search_lists_valid_configurations_fastest_first(capsys):
    argv = ["plan", "--search", "--world-size", "16", "--top", "5", *SMALL]
    status, out, err = run(argv, capsys)
    assert status == 0 and err == ""  # no progress line when stderr is not a terminal
    assert "valid configurations of 16 GPUs" in out and "ZeRO" in out
    status, out, _ = run([*argv, "--json"], capsys)
    results = json.loads(out)["results"]
    assert 0 < len(results) <= 5
    times = [r["step_time_s"] for r in results]
    assert times == sorted(times)
    for r in results:
        assert r["tp"] * r["pp"] * r["dp"] * r["cp"] == 16
        assert r["micro_batch"] * r["dp"] * r["accumulation"] == 16


def test_search_of_1024_gpus_finds_some_and_784_finds_nothing(capsys):
    model = "--layers 96 --hidden 12288 --heads 96 --seq 2048 --global-batch 1536".split()
    status, out, _ = run(["plan", "--search", "--world-size", "1024", *model], capsys)
    assert status == 0
    status, out, _ = run(["plan", "--search", "--world-size", "784", *model], capsys)
    assert status == 1 and "No configuration of 784 GPUs" in out


def test_config_file_under_the_flags(tmp_path, capsys):
    path = tmp_path / "job.toml"
    path.write_text(
        "world_size = 8\ntp = 2\npp = 2\nlayers = 4\nhidden = 64\nheads = 4\nseq = 64\n"
        "global_batch = 16\nmicro_batch = 2\n"
    )
    status, out, _ = run(["plan", "--config", str(path), "--json"], capsys)
    assert status == 0 and json.loads(out)["derived"]["dp"] == 2
    status, out, _ = run(["plan", "--config", str(path), "--world-size", "10", "--json"], capsys)
    assert status == 1 and json.loads(out)["violations"][0]["rule"] == "world_size"


def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["plan", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "world = tp·pp·cp·dp" in out and "784" in out and "--search" in out
    assert "80GiB" in out and "exit status" in out


HUGE = str(2**62)
MODEL_784 = "--layers 96 --hidden 12288 --heads 96 --global-batch 1536".split()


@pytest.mark.parametrize(
    "argv, bad, rule",
    [
        (["--world-size", HUGE, "--tp", "8", "--pp", "4", *MODEL_784], HUGE, "limit of 1048576"),
        (["--search", "--world-size", HUGE, *MODEL_784], HUGE, "limit of 1048576"),
        (
            ["--world-size", "784", "--layers", HUGE, "--hidden", "64", "--heads", "4"],
            HUGE,
            "limit of 16384",
        ),
        (["--tp", HUGE, "--params", "7B"], HUGE, "limit of 1048576"),
        (["--search", "--top", "-1", "--world-size", "8", *SMALL], "-1", "between 0 and 1000"),
        (["--suggestions", "-3", "--world-size", "8", *SMALL], "-3", "between 0 and 1000"),
        (
            [
                "--search",
                "--world-size",
                "720720",
                "--layers",
                "10080",
                "--hidden",
                "65520",
                "--heads",
                "720",
                "--global-batch",
                "16216200",
                "--gpus-per-node",
                "1024",
            ],
            "720720",
            "more than its bound of 50000",
        ),
    ],
)
def test_huge_or_negative_sizes_are_refused_before_any_search(argv, bad, rule, capsys):
    from fuzzkit import run_cli

    outcome = run_cli(["plan", *argv], bad=bad, timeout=10)
    assert outcome.status == 2
    assert rule in outcome.stderr


def test_top_keeps_exactly_n_rows_and_zero_keeps_all(capsys):
    argv = ["plan", "--search", "--world-size", "16", "--json", *SMALL]
    status, out, _ = run([*argv, "--top", "0"], capsys)
    every = json.loads(out)
    assert status == 0 and len(every["results"]) == every["count"] > 3
    status, out, _ = run([*argv, "--top", "3"], capsys)
    assert [r["step_time_s"] for r in json.loads(out)["results"]] == [
        r["step_time_s"] for r in every["results"][:3]
    ]


def test_config_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    from fuzzkit import run_cli

    fifo = tmp_path / "job.toml"
    os.mkfifo(fifo)
    outcome = run_cli(["plan", "--config", str(fifo)], bad=str(fifo), timeout=5)
    assert outcome.status == 2 and "not a regular file" in outcome.stderr
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' * 3000 + "1" + "}" * 3000)
    outcome = run_cli(["plan", "--config", str(deep)], bad=str(deep), timeout=5)
    assert outcome.status == 2 and "deeper" in outcome.stderr
