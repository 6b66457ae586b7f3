"""Work.get_future() in an ordinary torch.distributed program, run unchanged under real gloo
(torchrun's environment) and under `collsim exec -n K`: each future's value (the output
tensors, a list), done() once waited, and then() chains, as a DDP communication hook uses
them, and torch.futures.wait_all / collect_all over several.  Every tensor holds integers,
so both must print the same."""

import torch
import torch.distributed as dist

dist.init_process_group()  # gloo on a CPU machine; collsim under collsim exec
rank, k = dist.get_rank(), dist.get_world_size()


def show(what, work):
    future = work.get_future()
    value = future.wait()
    shown = [t.tolist() for t in value]
    print(f"{what}: {type(value).__name__} {shown} done={future.done()}", flush=True)


show("all_reduce", dist.all_reduce(torch.arange(3) * (rank + 1), async_op=True))
gathered = torch.zeros(2 * k, dtype=torch.int64)
mine = torch.full((2,), rank, dtype=torch.int64)
show("all_gather_into_tensor", dist.all_gather_into_tensor(gathered, mine, async_op=True))
outputs = [torch.zeros(2, dtype=torch.int64) for _ in range(k)]
show("all_gather", dist.all_gather(outputs, mine + 10, async_op=True))
show("broadcast", dist.broadcast(torch.full((2,), rank + 5), src=k - 1, async_op=True))
show("barrier", dist.barrier(async_op=True))
# a communication hook's shape: all-reduce a gradient, then divide by the world size
gradient = torch.full((4,), 2.0 * (rank + 1))
averaged = dist.all_reduce(gradient, async_op=True).get_future().then(lambda f: f.value()[0] / k)
twice = averaged.then(lambda f: f.value() * 2)
print(f"then: {averaged.wait().tolist()} {twice.wait().tolist()}", flush=True)
works = [dist.all_reduce(torch.full((1,), rank + i), async_op=True) for i in range(3)]
values = torch.futures.wait_all([w.get_future() for w in works])
print(f"wait_all: {[[t.tolist() for t in v] for v in values]}", flush=True)
works = [dist.broadcast(torch.full((1,), rank + i), src=0, async_op=True) for i in range(2)]
both = torch.futures.collect_all([w.get_future() for w in works]).wait()
print(f"collect_all: {[f.value()[0].tolist() for f in both]}", flush=True)
dist.destroy_process_group()
