"""torch's own DistributedDataParallel, unmodified, under real gloo (torchrun's environment)
and under `collsim exec -n K`: its reducer all-reduces the gradient buckets from C++ and
waits on their futures there.  The inputs are small integers, so both must print the same
gradients and weights."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group()  # gloo on a CPU machine; collsim under collsim exec
rank = dist.get_rank()
torch.manual_seed(0)  # the same start on every rank (DDP broadcasts rank 0's anyway)
model = torch.nn.Sequential(
    torch.nn.Linear(4, 3, dtype=torch.float64), torch.nn.Linear(3, 2, dtype=torch.float64)
)
with torch.no_grad():
    for i, p in enumerate(model.parameters()):  # integer weights: sums are exact
        p.copy_(torch.arange(p.numel(), dtype=torch.float64).reshape(p.shape) - i)
ddp = DistributedDataParallel(model)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.125)
for step in range(2):
    x = torch.arange(8, dtype=torch.float64).reshape(2, 4) * (rank + 1) - step
    optimizer.zero_grad()
    ddp(x).sum().backward()
    optimizer.step()
    grads = [p.grad.flatten().tolist() for p in model.parameters()]
    print(f"step {step + 1} gradients: {grads}", flush=True)
print(f"weights: {[p.flatten().tolist() for p in model.parameters()]}", flush=True)
dist.destroy_process_group()
