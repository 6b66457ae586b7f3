"""Data parallel by hand with real torch.distributed: the gradients of a tiny linear model
all-reduced by the script itself, as DistributedDataParallel does inside.

Run it on four virtual ranks (needs ``pip install 'collsim[torch]'``)::

    collsim exec -n 4 examples/torch_ddp_by_hand.py

or on real processes with torchrun (gloo on a CPU machine)::

    torchrun --nproc-per-node 4 examples/torch_ddp_by_hand.py

Every rank starts from the same weights (a broadcast from rank 0), trains on its own
rows of each batch, sums the gradients with ``dist.all_reduce`` and divides by the
world size (each rank's loss is the mean over its rows, so the average of the ranks'
gradients is the gradient of the mean over the whole batch), and takes the same SGD
step.  Rank 0 then trains one copy of the model alone on the whole batches and prints
how far the two sets of weights are apart: float rounding, about 1e-16.
"""

import torch
import torch.distributed as dist

BATCH = 16  # rows in a global batch, split evenly between the ranks
FEATURES, OUTPUTS = 3, 2
STEPS = 4
LR = 0.1


def make_model():
    torch.manual_seed(0)  # the same weights on every rank (the broadcast below makes sure)
    return torch.nn.Linear(FEATURES, OUTPUTS, dtype=torch.float64)


def batches():
    """The same global batches on every rank: ``STEPS`` of (x, y), x (BATCH, FEATURES)."""
    g = torch.Generator().manual_seed(1)
    true_w = torch.tensor([[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]], dtype=torch.float64)
    for _ in range(STEPS):
        x = torch.randn(BATCH, FEATURES, generator=g, dtype=torch.float64)
        yield x, x @ true_w.T


def step(model, x, y):
    """One SGD step of ``model`` on (x, y); returns the loss (mean squared error)."""
    model.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


def main():
    dist.init_process_group()  # gloo under torchrun; collsim's backend under collsim exec
    rank, world = dist.get_rank(), dist.get_world_size()
    if BATCH % world:
        raise SystemExit(f"BATCH={BATCH} rows do not split over {world} ranks")
    rows = BATCH // world
    model = make_model()
    for p in model.parameters():  # what DDP does when it wraps a model
        dist.broadcast(p.data, src=0)
    for i, (x, y) in enumerate(batches()):
        mine = slice(rank * rows, (rank + 1) * rows)  # this rank's rows of the batch
        loss = step(model, x[mine], y[mine])
        for p in model.parameters():
            dist.all_reduce(p.grad)  # the sum of every rank's gradient, on every rank
            p.grad /= world
        with torch.no_grad():
            for p in model.parameters():
                p -= LR * p.grad
        print(f"step {i + 1}: loss on my {rows} rows = {loss.item():.6f}")
    if rank == 0:
        alone = make_model()
        for x, y in batches():
            step(alone, x, y)
            with torch.no_grad():
                for p in alone.parameters():
                    p -= LR * p.grad
        gap = max(
            (a - b).abs().max().item() for a, b in zip(model.parameters(), alone.parameters())
        )
        print(f"largest difference from one process training alone: {gap:.1e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
