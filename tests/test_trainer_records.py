"""The trainer's results and the verification's options are typed records, read by name.

A rank program of the mesh trainer returns one :class:`RankStep` per optimizer step, the
run's assembly turns them into :class:`WholeStep` records, and a pipeline pass's messages
are a :class:`PassMessages`; nothing on the trainer path takes a field out of a tuple by
its position (``returned[r][i][2]`` once meant the parameters in one place and the saved
state in another). The AST rule below is the house rule; the runs show the records.

``verify`` and ``verify_context`` take one :class:`VerifyConfig` (or a scheme and its
fields as keywords), which the command line builds once from its flags and which is checked
once, however many readers it has.
"""

import ast
import dataclasses
import inspect
import math
import sys
from pathlib import Path

import pytest
from fuzzkit import time_limit
from hypothesis import given
from hypothesis import strategies as st

import collsim.verify
import collsim.verify.run
from collsim.cli import main
from collsim.errors import ConfigError
from collsim.nn import Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.data.checkpoint import SavedState
from collsim.parallel.data.sync import StepShards
from collsim.parallel.mesh import train
from collsim.parallel.mesh_run import RankStep
from collsim.parallel.pipeline.schedules import build_schedule
from collsim.parallel.pipeline.stage import PassMessages, pipeline_messages
from collsim.parallel.runs.pipeline import toy_batch, toy_model
from collsim.verify.checks import check_arguments, check_sharding
from collsim.verify.config import ALL_SCHEMES, VerifyConfig
from collsim.verify.context import verify_context

PACKAGE = Path(__file__).resolve().parents[1] / "collsim"


def trainer_path():
    """The modules that produce or read the trainer's results (run_pipeline, which reads
    the mesh trainer's run, moved from pipeline/ to runs/)."""
    paths = [*PACKAGE.glob("parallel/mesh*.py"), *PACKAGE.glob("parallel/pipeline/**/*.py")]
    paths += [PACKAGE / "parallel" / "runs" / "pipeline.py"]
    paths += [*PACKAGE.glob("verify/*.py"), PACKAGE / "cli" / "verify.py"]
    return sorted(paths)


def _constant_index(node):
    """``x[2]``, ``x[-1]``, ``x[:2]``: an index a reader has to look up."""
    index = node.slice
    if isinstance(index, ast.Slice):
        return any(bound is not None for bound in (index.lower, index.upper))
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    return isinstance(index, ast.Constant) and type(index.value) is int


def positional_reads(source):
    """Lines that take a field out of a per-rank (or per-step) element by position:
    ``returns[r][i][1]``, ``rec[r][0]``; ``wholes[r][0].outcome`` (the step-1 record of
    rank r, read by name) is not one."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript)):
            continue
        if _constant_index(node) and not isinstance(parents.get(node), ast.Attribute):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_rule_sees_the_reads_it_forbids():
    assert positional_reads("x = returns[r][i][2]\ny = rec[r][-1]\nz = out[r][i][:2]\n") == [
        "line 1: returns[r][i][2]",
        "line 2: rec[r][-1]",
        "line 3: out[r][i][:2]",
    ]
    assert positional_reads("a = wholes[r][0].outcome\nb = grid[s, 0]\nc = x[0]\n") == []


def test_no_module_on_the_trainer_path_reads_a_result_by_position():
    paths = trainer_path()
    assert any(p.name == "mesh_run.py" for p in paths) and len(paths) > 10
    offenders = {
        str(p.relative_to(PACKAGE)): reads
        for p in paths
        if (reads := positional_reads(p.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_each_rank_returns_one_rank_step_per_step_and_its_saved_state():
    model = toy_model(layers=2, hidden=8, heads=2)
    batches = [toy_batch(batch=4, seed=1), toy_batch(batch=4, seed=2)]
    config = ParallelConfig(dp=2, zero=1)
    run = train(model, batches, config, optimizer=Adam(1e-2), state_dict="sharded")
    assert run.match
    for rank, steps in enumerate(run.run.returns):
        assert [type(step) for step in steps] == [RankStep, RankStep]
        assert all(isinstance(step.shards, StepShards) for step in steps)
        assert steps[0].saved is None  # saved after the last step only
        assert isinstance(steps[-1].saved, SavedState) and steps[-1].saved.rank == rank
    assert run.saved == [steps[-1].saved for steps in run.run.returns]
    # the stepped parameters are the run's, not the saved state (index 2 once meant either)
    assert set(run.params) == set(model.params)


def test_a_pass_names_its_receives_and_its_sends():
    links = pipeline_messages(build_schedule("1f1b", 2, 2))
    assert all(type(messages) is PassMessages for messages in links.values())
    sent = sorted((s, dst, tag) for (s, _), m in links.items() for dst, tag in m.sends)
    got = sorted((src, s, tag) for (s, _), m in links.items() for src, tag in m.receives)
    assert sent == got and len(sent) == 2 * 2  # 2 micro-batches cross 1 boundary twice


# ---- verify takes one config ----------------------------------------------------------------


@pytest.mark.parametrize("function", [collsim.verify.verify, verify_context])
def test_verify_takes_one_config(function):
    kinds = [p.kind for p in inspect.signature(function).parameters.values()]
    assert kinds == [inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_KEYWORD]


class Trained(Exception):
    """Raised in place of the training: what came before it is the check."""


def calls_of(functions, run):
    """How many times each of ``functions`` ran (however its name was imported) in ``run``."""
    codes = {f.__code__: f.__name__ for f in functions}
    counts = dict.fromkeys(codes.values(), 0)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            counts[codes[frame.f_code]] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return counts


def test_the_cli_builds_one_config_and_every_rule_runs_once(monkeypatch):
    given = []

    def no_training(problem, config, *args, **kwargs):
        raise Trained

    real_verify = collsim.verify.verify

    def spy(*args, **kwargs):
        given.append((args, kwargs))
        return real_verify(*args, **kwargs)

    monkeypatch.setattr(collsim.verify.run, "train_on_cluster", no_training)
    monkeypatch.setattr(collsim.verify, "verify", spy)
    argv = [
        "verify",
        "zero",
        "--stage",
        "2",
        "--dp",
        "2",
        "--hidden",
        "8",
        "--heads",
        "2",
        "--seq",
        "4",
        "--steps",
        "1",
    ]

    def run():
        with pytest.raises(Trained):
            main(argv)

    assert calls_of([check_sharding, check_arguments], run) == {
        "check_sharding": 1,
        "check_arguments": 1,
    }
    [(args, kwargs)] = given
    assert kwargs == {} and len(args) == 1 and isinstance(args[0], VerifyConfig)
    config = args[0]
    assert (config.scheme, config.stage, config.dp, config.steps) == ("zero", 2, 2, 1)
    assert config.resolved.parallel.zero == 2 and config.names["stage"] == "--stage"


def test_a_config_and_its_keywords_run_the_same_check():
    by_keywords = collsim.verify.verify(
        "tp-row", tp=2, batch=2, hidden=4, ffn_hidden=8, seq=2, steps=1
    )
    config = VerifyConfig("tp-row", tp=2, batch=2, hidden=4, ffn_hidden=8, seq=2, steps=1)
    assert collsim.verify.verify(config).to_dict() == by_keywords.to_dict()
    assert by_keywords.match


@pytest.mark.parametrize(
    ("config", "options", "bad"),
    [
        ("dp", dict(hiden=8), "'hiden'; nearest valid option 'hidden'"),
        ("dq", dict(), "'dq'"),
        ("dp", dict(cp=2), "cp applies to schemes cp and nd"),
        ("cp", dict(stage=2), "stage does not apply to scheme 'cp'"),
        ("fsdp", dict(stage=2), "stage applies to zero"),
        ("cp", dict(seq=6, cp=4), "seq=6"),
    ],
)
def test_a_config_is_refused_by_name_before_training(config, options, bad, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(collsim.verify.run, "train_on_cluster", no_training)
    with pytest.raises(ConfigError) as error:
        collsim.verify.verify(config, **options)
    assert bad in str(error.value)


OPTIONS = [f.name for f in dataclasses.fields(VerifyConfig) if f.name not in ("scheme", "names")]
ODD_VALUES = st.sampled_from([0, -1, 2.5, 10**9, 2**70, math.nan, math.inf, "x", "", True, [1]])


@given(scheme=st.sampled_from(ALL_SCHEMES), option=st.sampled_from(OPTIONS), value=ODD_VALUES)
def test_a_config_is_checked_or_refused_by_name_however_odd_its_values(scheme, option, value):
    """Reading ``.sizes`` and ``.resolved`` succeeds or raises a ConfigError that names the
    value (or the option, when the scheme takes no such option); nothing else, and quickly."""
    config = VerifyConfig(scheme, **{option: value})
    try:
        with time_limit(5.0):
            _ = config.sizes, config.resolved
    except ConfigError as error:
        message = str(error)
        named = str(value) in message or repr(value) in message
        assert named or option in message or option == "sequence_parallel" and "sp" in message
