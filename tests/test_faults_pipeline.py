"""A straggler in a pipeline (issue 15, item 5): one slow stage, against its closed form.

GPipe on free links is a flow shop of m identical micro-batches through p stages, the
forwards first, then the backwards in reverse; a flow shop of identical jobs finishes at
Σ_s a_s + (m-1)·max_s a_s.  With every pass at T = t_f + t_b + t_w per micro-batch and
stage j at f >= 1 times that, the step is (p-1+f)·T + (m-1)·f·T = (m·f + p - 1)·T: it grows
by (f-1)·m·T, all of the slow stage's extra work, which lies on the critical path whichever
stage it is.  1F1B interleaves forwards with backwards, so part of that extra work can hide
in the stages' idle time: the step grows by at most (f-1)·m·T, and by exactly that when the
last stage is the slow one (its m forwards and backwards run back to back).
"""

import pytest

import collsim
from collsim import topology
from collsim.errors import WatchdogTimeout
from collsim.parallel.pipeline.runner import pipeline_step
from collsim.runtime.faults import CrashRank, Faults, SlowRank

T = 3e-3  # t_f = t_b = t_w = 1 ms


def _cluster(p, faults):
    return collsim.Cluster(
        topology.bidirectional_ring(p, "inf", 0), compute_rate=float("inf"), faults=faults
    )


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8)])
@pytest.mark.parametrize("factor", [1.5, 3.0])
def test_gpipe_with_one_slow_stage_matches_its_closed_form(p, m, factor):
    for stage in range(p):
        faults = Faults(slow_ranks=(SlowRank(stage, factor),))
        result = pipeline_step("gpipe", p, m, cluster=_cluster(p, faults))
        assert result.step_time == pytest.approx((m * factor + p - 1) * T, rel=1e-12)
        assert result.match
        # the slow stage's passes are the ones that took longer
        assert result.busy_time[stage] == pytest.approx(m * factor * T)


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8)])
def test_1f1b_grows_by_at_most_the_slow_stage_extra_work(p, m):
    factor = 2.0
    base = pipeline_step("1f1b", p, m).step_time
    extra = (factor - 1) * m * T
    for stage in range(p):
        faults = Faults(slow_ranks=(SlowRank(stage, factor),))
        step = pipeline_step("1f1b", p, m, cluster=_cluster(p, faults)).step_time
        assert base < step <= base + extra * (1 + 1e-12)
        if stage == p - 1:
            assert step == pytest.approx(base + extra, rel=1e-12)


def test_a_crashed_stage_stops_the_step_with_the_watchdog_report():
    faults = Faults(crash_ranks=(CrashRank(1, 5e-3),), watchdog_timeout=1.0)
    with pytest.raises(WatchdogTimeout) as err:
        pipeline_step("1f1b", 4, 8, cluster=_cluster(4, faults))
    assert err.value.culprit.rank == 1
    assert err.value.time == pytest.approx(err.value.last_progress + 1.0)
    assert "rank 1: CRASHED at t=5 ms" in str(err.value)
