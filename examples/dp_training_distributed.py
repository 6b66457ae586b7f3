"""Data-parallel training written the way a torch.distributed user writes it.

Run it on four virtual GPUs::

    collsim exec -n 4 examples/dp_training_distributed.py

Every rank builds the model, takes rank 0's parameters (a broadcast, as PyTorch's
DistributedDataParallel does when it wraps a model), and then, for every batch, runs
forward and backward on its own shard of the rows with collsim.nn's numpy layers,
all-reduces the gradients (``ReduceOp.SUM``, then divides by the world size: the
average, because each rank's loss is the mean over its shard) and takes the same SGD
step.  So every rank holds the same parameters, and they equal one device training on
the whole batch (tests/test_distributed_example.py checks it to 1e-10).  Each rank
prints the loss on its own shard; ``collsim exec`` tags every line with the rank and, at
the end, prints the simulated time and the bytes each rank sent.
"""

import sys

import numpy as np

import collsim.distributed as dist
from collsim.nn import SGD, Linear, ReLU, Sequential, mse_loss

BATCH = 32  # rows in a global batch: each of the world_size ranks trains on BATCH / world_size
FEATURES, HIDDEN, OUTPUTS = 6, 16, 2
STEPS = 5
LR = 0.1


def make_model(seed):
    """A two-layer MLP in float64 (so the check against one device is exact to rounding)."""
    rng = np.random.default_rng(seed)
    return Sequential(Linear.init(FEATURES, HIDDEN, rng), ReLU(), Linear.init(HIDDEN, OUTPUTS, rng))


def make_batches(seed=1):
    """STEPS batches ``(x, y)``, the same on every rank: y is a fixed linear map of x plus noise."""
    rng = np.random.default_rng(seed)
    true_map = rng.normal(size=(FEATURES, OUTPUTS))
    batches = []
    for _ in range(STEPS):
        x = rng.normal(size=(BATCH, FEATURES))  # (B, F)
        y = x @ true_map + 0.1 * rng.normal(size=(BATCH, OUTPUTS))  # (B, O)
        batches.append((x, y))
    return batches


def main():
    dist.init_process_group(backend="collsim")
    rank, world = dist.get_rank(), dist.get_world_size()
    if BATCH % world:
        sys.exit(f"a batch of {BATCH} rows does not split over {world} ranks: use -n 1, 2, 4, 8")
    shard = BATCH // world

    model = make_model(seed=rank)  # every rank starts from its own random weights ...
    for param in model.params.values():
        dist.broadcast(param, src=0)  # ... and takes rank 0's, as DDP does
    optimizer = SGD(lr=LR)

    for step, (x, y) in enumerate(make_batches(), start=1):
        rows = slice(rank * shard, (rank + 1) * shard)  # this rank's shard of the batch
        out, ctx = model.forward(x[rows])  # (B / world, O)
        loss, dout = mse_loss(out, y[rows])
        _, grads = model.backward(ctx, dout)
        for grad in grads.values():
            dist.all_reduce(grad, op=dist.ReduceOp.SUM)
            grad /= world  # the mean of the shards' gradients: the whole batch's gradient
        optimizer.step(model.params, grads)
        print(f"step {step}: loss {float(loss):.6f}")

    dist.destroy_process_group()
    return model.params


if __name__ == "__main__":
    main()
