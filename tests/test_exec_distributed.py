"""collsim.exec's algorithm reaches torch.distributed-style collectives as it does MPI's."""

import numpy as np
import pytest

import collsim
import collsim.distributed as dist
from collsim.collectives.records import is_collective


def _main():
    dist.init_process_group("nccl")
    x = np.full(8, float(dist.get_rank()))
    dist.all_reduce(x)
    return x


@pytest.mark.parametrize("algorithm", ["ring", "tree", "halving_doubling"])
def test_exec_algorithm_reaches_distributed_all_reduce(algorithm):
    result = collsim.exec(_main, n=4, algorithm=algorithm, echo=False)
    assert all(np.all(x == 6.0) for x in result.returns)
    used = {t.tag.algorithm for t in result.trace.transfers if is_collective(t.tag)}
    assert used == {algorithm}
