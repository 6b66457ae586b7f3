"""Solutions to lesson 11 (debugging a hang).  Each name is the lesson's answer slot of the same
name, derived from the lesson's programs or a function, never a number copied from its output."""

K, N_SAMPLES = 4, 11

# each rank runs len(range(rank, n, K)) steps, one all-reduce per step
STEPS = [len(range(r, N_SAMPLES, K)) for r in range(K)]
SHORT = [r for r in range(K) if STEPS[r] < max(STEPS)]  # they leave one all-reduce early

# the gradient sizes of lesson 11's train_step: rank 3 loaded the wrong config
N_PARAMS = [10 if r == 3 else 8 for r in range(K)]


def shift(rank, x):
    """isend returns at once, so every rank reaches its recv and every send finds its partner.

    The other fix orders by parity:
        if rank.id % 2 == 0: send, then recv;  else: recv, then send.
    """
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    handle = yield rank.isend(right, x)
    got = yield rank.recv(left)
    yield rank.wait(handle)
    return got


# 11.1: the rank with fewer steps leaves one all-reduce early
missing_rank_answer = SHORT[0]
# 11.2: every rank completed min(STEPS) all-reduces (#0 .. #min-1); the next one hangs
hang_position_answer = min(STEPS)
# 11.3: the one rank whose gradient size differs
odd_rank_answer = next(r for r in range(K) if N_PARAMS.count(N_PARAMS[r]) == 1)
# 11.4: the lesson's check runs the rank program on rings of several sizes
shift_answer = shift
