"""collsim.distributed's messages carry typed tags, as collsim.mpi's do (DESIGN.md, principle 4):
the group and the user's tag, or the group and the call, as fields; a report names them."""

import json

import numpy as np
import pytest

import collsim
import collsim.distributed as dist
from collsim.distributed.tags import CallTag, MessageTag
from collsim.errors import DeadlockError
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.switch(k)), main)


def test_a_send_carries_its_group_and_tag_as_fields():
    def main():
        dist.init_process_group()
        if dist.get_rank() == 0:
            dist.send(np.ones(2), dst=1, tag=5)
        else:
            dist.recv(np.zeros(2), src=0, tag=5)
        return dist.group.WORLD.id

    result = run(2, main)
    (transfer,) = result.trace.transfers
    assert type(transfer.tag) is MessageTag
    assert (transfer.tag.group, transfer.tag.tag) == (result.returns[0], 5)
    assert repr(transfer.tag) == f"torch.distributed tag 5 (group {result.returns[0]})"
    events = json.loads(result.trace.to_chrome())["traceEvents"]
    spans = [e["args"] for e in events if "dist_tag" in e.get("args", {})]  # send, receive
    assert len(spans) == 2
    for args in spans:
        assert (args["dist_group"], args["dist_tag"]) == (result.returns[0], 5)
        assert args["tag"] == repr(transfer.tag)  # the export names it as a report does


@pytest.mark.parametrize("call", ["gather", "all_gather_object"])
def test_a_call_built_from_point_to_point_carries_its_name(call):
    def main():
        dist.init_process_group()
        if call == "gather":
            out = [np.zeros(1) for _ in range(3)] if dist.get_rank() == 0 else None
            dist.gather(np.ones(1), out, dst=0)
        else:
            dist.all_gather_object([None] * 3, dist.get_rank())

    tags = {t.tag for t in run(3, main).trace.transfers}
    assert {type(tag) for tag in tags} == {CallTag}
    assert {tag.call for tag in tags} == {call}


def test_a_deadlock_report_names_the_tag_readably():
    def main():
        dist.init_process_group()
        dist.recv(np.zeros(1), src=1 - dist.get_rank(), tag=7)

    with pytest.raises(DeadlockError, match=r"torch\.distributed tag 7 \(group \d+\)"):
        run(2, main)
