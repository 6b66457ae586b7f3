"""Solutions to lesson 9 (debugging a hang). Each answer is derived from the lesson's programs
or is a function, never a number copied from the lesson's output."""

import numpy as np

import collsim

K, N_SAMPLES = 4, 11

# each rank runs len(range(rank, n, K)) steps, one all-reduce per step
STEPS = [len(range(r, N_SAMPLES, K)) for r in range(K)]
SHORT = [r for r in range(K) if STEPS[r] < max(STEPS)]  # they leave one all-reduce early

# the gradient sizes of lesson 9's train_step: rank 3 loaded the wrong config
N_PARAMS = [10 if r == 3 else 8 for r in range(K)]


def my_shift(rank, x):
    """isend returns at once, so every rank reaches its recv and every send finds its partner.

    The other fix orders by parity:
        if rank.id % 2 == 0: send, then recv;  else: recv, then send.
    """
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    handle = yield rank.isend(right, x)
    got = yield rank.recv(left)
    yield rank.wait(handle)
    return got


def run_on_ring(program):
    """The same harness as the lesson's: ``(k, seed) -> what each rank returned``."""

    def run(k, seed):
        ring = collsim.Cluster(collsim.topology.bidirectional_ring(k))
        return ring.run(lambda rank: program(rank, np.array([rank.id, seed], float))).returns

    return run


SOLUTIONS = {
    "9.1": SHORT[0],
    # every rank completed min(STEPS) all-reduces (#0 .. #min-1); the next one hangs
    "9.2": min(STEPS),
    "9.3": next(r for r in range(K) if N_PARAMS.count(N_PARAMS[r]) == 1),
    "9.4": run_on_ring(my_shift),
}
