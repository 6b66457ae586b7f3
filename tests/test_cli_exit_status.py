"""Exit statuses (issue 25, item 13): 2 for every refused input, as argparse exits for a bad
flag; 1 for a negative verdict; every sub-command's --help says so; an unknown flag of a
sub-command is reported with that sub-command's usage, not the top-level one."""

import argparse

import pytest
from fuzzkit import run_cli

from collsim.cli import build_parser, main

# one refused value per sub-command (strategies takes no value to refuse): (argv, the value)
REFUSED = {
    "tour": (["tour", "--no-pause", "--lang", "klingon"], "klingon"),
    "run": (["run", "all-reduce", "--size", "10 parsecs"], "10 parsecs"),
    "step": (["step", "all-reduce", "--no-pause", "--topology", "moebius"], "moebius"),
    "plan": (["plan", "--model", "gpt4", "--world-size", "8"], "gpt4"),
    "pipeline": (["pipeline", "--latency", "5 parsecs"], "5 parsecs"),
    "verify": (["verify", "dp", "--bucket-size", "lots"], "lots"),
    "hardware": (["hardware", "dgx-h10"], "dgx-h10"),
    "exec": (["exec", "-n", "2", "no_such_script.py"], "no_such_script.py"),
    "lesson": (["lesson", "99", "--no-pause"], "99"),
}


def _viz_kinds():
    from collsim.cli.viz_kinds import KINDS

    build_parser()  # registers the kinds
    return sorted(KINDS)


@pytest.mark.parametrize(
    ("argv", "bad"),
    [*REFUSED.values(), *((["viz", k, "--out", "figure.xyz"], "figure.xyz") for k in _viz_kinds())],
    ids=[*REFUSED, *(f"viz-{k}" for k in _viz_kinds())],
)
def test_a_refused_value_exits_2_naming_it(argv, bad):
    outcome = run_cli(argv, bad=bad, timeout=30)
    assert outcome.status == 2, outcome
    assert "collsim: error:" in outcome.stderr and bad in outcome.stderr


# the shortest valid start of each sub-command, so that the unknown flag is all that is wrong
STARTS = [
    ["tour"],
    ["run", "all-reduce"],
    ["step", "all-reduce"],
    ["plan"],
    ["pipeline"],
    ["verify", "dp"],
    ["strategies"],
    ["hardware"],
    ["exec", "script.py"],
    ["lesson", "list"],
    *(["viz", k] for k in _viz_kinds()),
]


@pytest.mark.parametrize("start", STARTS, ids=[" ".join(s) for s in STARTS])
def test_an_unknown_flag_prints_the_sub_commands_usage_and_exits_2(start):
    command = [w for w in start if not w.endswith(".py") and w not in ("all-reduce", "dp", "list")]
    argv = (
        [*start[:1], "--no-such-flag", *start[1:]]
        if start[0] == "exec"
        else [*start, "--no-such-flag"]
    )
    outcome = run_cli(argv, bad="--no-such-flag")
    assert outcome.status == 2
    assert f"usage: collsim {' '.join(command)} " in outcome.stderr, outcome.stderr
    assert f"collsim {' '.join(command)}: error: unrecognized arguments: --no-such-flag" in (
        outcome.stderr
    )


def _parsers(parser, path=("collsim",)):
    """Every parser under ``parser`` (sub-commands and viz kinds), with its command path."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


@pytest.mark.parametrize("path", [p for p, _ in _parsers(build_parser())], ids=" ".join)
def test_every_help_says_what_each_exit_status_means(path):
    parser = dict(_parsers(build_parser()))[path]
    text = " ".join(parser.format_help().split())
    assert "exit status: 0 " in text and "; 1 " in text, path
    assert "; 2 refused input (an unknown flag or a value collsim refuses" in text, path


def test_a_negative_verdict_still_exits_1(capsys):
    invalid = [
        "plan",
        "--world-size",
        "784",
        "--tp",
        "8",
        "--pp",
        "4",
        "--layers",
        "96",
        "--hidden",
        "12288",
        "--heads",
        "96",
        "--seq",
        "2048",
        "--global-batch",
        "1536",
        "--micro-batch",
        "1",
    ]
    assert main(invalid) == 1
    assert "INVALID" in capsys.readouterr().out
