"""Hypothesis properties of the planner: valid means every equality holds, invalid names every
broken rule, and every suggestion is itself valid."""

from hypothesis import given
from hypothesis import strategies as st

from collsim.plan import PlanConfig, plan


@st.composite
def configs(draw):
    heads = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]))
    hidden = heads * draw(st.sampled_from([8, 16, 24])) + draw(st.sampled_from([0, 0, 0, 1]))
    return PlanConfig(
        layers=draw(st.integers(1, 24)),
        hidden=hidden,
        heads=heads,
        seq=draw(st.sampled_from([64, 96, 100, 128, 256])),
        vocab=1000,
        world_size=draw(st.integers(1, 128)),
        gpus_per_node=draw(st.sampled_from([4, 8])),
        gpu_memory=draw(st.sampled_from(["64KiB", "4MiB", "80GiB"])),
        tp=draw(st.sampled_from([1, 2, 3, 4, 8, 16])),
        pp=draw(st.integers(1, 8)),
        cp=draw(st.sampled_from([1, 1, 2, 3])),
        vpp=draw(st.sampled_from([1, 1, 2])),
        sp=draw(st.booleans()),
        zero=draw(st.integers(0, 3)),
        global_batch=draw(st.integers(1, 256)),
        micro_batch=draw(st.integers(1, 4)),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
    )


def broken(cfg):
    """The hard rules each configuration breaks, computed here independently of the planner."""
    q = cfg.tp * cfg.pp * cfg.cp
    out = set()
    if cfg.world_size % q:
        out.add("world_size")
    else:
        dp = cfg.world_size // q
        if cfg.global_batch % (cfg.micro_batch * dp):
            out.add("global_batch")
        elif cfg.vpp > 1 and cfg.pp > 1 and (cfg.global_batch // (cfg.micro_batch * dp)) % cfg.pp:
            out.add("vpp_microbatches")
    if cfg.tp > 1:
        for rule, value in (("hidden_tp", cfg.hidden), ("heads_tp", cfg.heads)):
            if value % cfg.tp:
                out.add(rule)
        if 4 * cfg.hidden % cfg.tp:
            out.add("ffn_tp")
    if cfg.pp > cfg.layers:
        out.add("pp_layers")
    if cfg.vpp > 1 and cfg.layers % (cfg.pp * cfg.vpp):
        out.add("layers_vpp")
    if cfg.vpp > 1 and cfg.pp < 2:
        out.add("vpp_pp")
    if cfg.sp and cfg.tp == 1:
        out.add("sp_tp")
    if cfg.sp and cfg.tp > 1 and (cfg.seq / cfg.cp) % cfg.tp:
        out.add("sp_seq")
    if cfg.cp > 1 and cfg.seq % (2 * cfg.cp):
        out.add("cp_seq")
    return out


@given(configs())
def test_valid_means_every_equality_holds(cfg):
    report = plan(cfg, suggestions=0)
    d = report.derived
    if report.valid:
        assert cfg.world_size == cfg.tp * cfg.pp * cfg.cp * d["dp"]
        assert isinstance(d["dp"], int) and isinstance(d["accumulation"], int)
        assert cfg.global_batch == cfg.micro_batch * d["dp"] * d["accumulation"]
        assert cfg.hidden % cfg.tp == 0 and cfg.heads % cfg.tp == 0
        assert report.memory["total"] <= cfg.gpu_memory
        assert broken(cfg) == set()


@given(configs())
def test_invalid_names_every_broken_rule(cfg):
    report = plan(cfg, suggestions=0)
    named = {v.rule for v in report.violations}
    assert broken(cfg) <= named
    assert ("memory" in named) == (report.memory["total"] > cfg.gpu_memory)
    assert named - {"memory"} <= broken(cfg)  # and nothing else is claimed
    for v in report.violations:
        assert v.message and v.rule


@given(configs())
def test_suggestions_are_valid_configurations(cfg):
    report = plan(cfg, suggestions=3)
    original = {w.rule for w in report.warnings}
    for s in report.suggestions:
        again = plan(s.config, suggestions=0)
        assert again.valid, (s.describe(), [v.message for v in again.violations])
        assert {w.rule for w in again.warnings} <= original | {"zero_unsharded"}
        assert s.changes and all(old != new for old, new in s.changes.values())
