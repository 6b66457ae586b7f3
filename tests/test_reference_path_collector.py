"""The cyclic collector is switched off during a run only as a speed setting: the
reference path (``Cluster(fast=False)``) runs as plain Python, collector on."""

import collsim


def test_only_the_fast_setting_switches_the_cyclic_collector_off_during_a_run():
    import gc

    from collsim import topology

    def during(fast):
        seen = []

        def program(rank):
            seen.append(gc.isenabled())
            yield rank.compute(seconds=1e-6)

        assert gc.isenabled()
        collsim.Cluster(topology.ring(2), fast=fast).run(program)
        assert gc.isenabled()  # as it was before the run
        return seen

    assert during(fast=False) == [True, True]  # the reference path: plain Python
    assert during(fast=True) == [False, False]
