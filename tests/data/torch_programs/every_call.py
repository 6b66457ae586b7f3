"""An ordinary torch.distributed program, run unchanged under real gloo (torchrun's
environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and under `collsim exec -n K`.
Every tensor holds integers (or sums of powers of two), so both must print the same."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

dist.init_process_group()  # gloo on a CPU machine; collsim under collsim exec
rank, k = dist.get_rank(), dist.get_world_size()


def show(what, value):
    print(f"{what}: {value}", flush=True)


t = torch.arange(5, dtype=torch.int64) * (rank + 1)
dist.all_reduce(t)
show("all_reduce sum", t.tolist())
for op in ("MAX", "MIN", "PRODUCT", "BAND", "BOR", "BXOR"):
    t = torch.tensor([rank + 3, 7 - rank, 2 * rank + 1], dtype=torch.int32)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    show(f"all_reduce {op}", t.tolist())
flags = torch.tensor([rank == 0, True, False, rank % 2 == 1])
dist.all_reduce(flags)
show("all_reduce bool", flags.tolist())
small = torch.tensor([100 + rank, 200], dtype=torch.uint8)
dist.all_reduce(small)
show("all_reduce uint8", small.tolist())

parts = [torch.zeros(2, dtype=torch.int64) for _ in range(k)]
dist.all_gather(parts, torch.tensor([rank, 10 * rank]))
show("all_gather", [p.tolist() for p in parts])
out = torch.zeros(3 * k, dtype=torch.float32)
dist.all_gather_into_tensor(out, torch.full((3,), float(rank)))
show("all_gather_into_tensor", out.tolist())
blocks = torch.arange(2 * k, dtype=torch.float64) * (rank + 1)
mine = torch.zeros(2, dtype=torch.float64)
dist.reduce_scatter_tensor(mine, blocks)
show("reduce_scatter_tensor", mine.tolist())

b = torch.tensor([rank * 11, 5])
dist.broadcast(b, src=k - 1)
show("broadcast", b.tolist())
r = torch.tensor([rank + 1.0, 2.0])
dist.reduce(r, dst=0, op=dist.ReduceOp.SUM)
show(
    "reduce", r.tolist() if rank == 0 else "only dst's tensor is defined"
)  # gloo's others hold partial sums
gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(k)] if rank == 0 else None
dist.gather(torch.tensor([rank * rank]), gathered, dst=0)
show("gather", gathered and [g.item() for g in gathered])
got = torch.zeros(2, dtype=torch.int64)
pieces = [torch.tensor([i, -i]) for i in range(k)] if rank == 1 else None
dist.scatter(got, pieces, src=1)
show("scatter", got.tolist())
out = torch.zeros(1, dtype=torch.int64)
dist.reduce_scatter(out, [torch.tensor([10 * i + rank]) for i in range(k)])
show("reduce_scatter", out.tolist())
pair = [torch.tensor([rank, 1]), torch.tensor([2 * rank])]
dist.all_reduce_coalesced(pair, op=dist.ReduceOp.SUM)
show("all_reduce_coalesced", [t.tolist() for t in pair])
mean = torch.tensor([float(rank), 2.0])
dist.all_reduce(mean, op=dist.ReduceOp.AVG)
show("all_reduce AVG", mean.tolist())
outs = [torch.zeros(k, dtype=torch.int64) for _ in range(2)]
with dist._coalescing_manager(async_ops=False):  # how FSDP issues its gathers: coalesced
    for i, o in enumerate(outs):
        dist.all_gather_into_tensor(o, torch.tensor([rank + 10 * i]))
show("coalesced all_gather_into_tensor", [o.tolist() for o in outs])
a2a = torch.zeros(k, dtype=torch.int64)
dist.all_to_all_single(a2a, torch.arange(k) + 100 * rank)
show("all_to_all_single", a2a.tolist())
uneven = torch.zeros(k * (rank + 1), dtype=torch.int64)  # rank r gets r + 1 rows from each
sizes = list(range(1, k + 1))  # rank r sends j + 1 rows to rank j
dist.all_to_all_single(uneven, torch.arange(sum(sizes)) + 100 * rank, [rank + 1] * k, sizes)
show("all_to_all_single uneven", uneven.tolist())
lists = [torch.zeros(1, dtype=torch.int64) for _ in range(k)]
dist.all_to_all(lists, [torch.tensor([100 * rank + i]) for i in range(k)])
show("all_to_all", [t.tolist() for t in lists])

# point-to-point around the ring, blocking and not
right, left = (rank + 1) % k, (rank - 1) % k
inbox = torch.zeros(2, dtype=torch.int64)
if rank % 2 == 0:
    dist.send(torch.tensor([rank, 7]), dst=right)
    dist.recv(inbox, src=left)
else:
    dist.recv(inbox, src=left)
    dist.send(torch.tensor([rank, 7]), dst=right)
show("send/recv", inbox.tolist())
inbox = torch.zeros(1)
reqs = [dist.isend(torch.tensor([rank * 2.0]), dst=right), dist.irecv(inbox, src=left)]
for req in reqs:
    req.wait()
show("isend/irecv", inbox.tolist())
inbox = torch.zeros(1)
ops = [
    dist.P2POp(dist.isend, torch.tensor([rank * 3.0]), right),
    dist.P2POp(dist.irecv, inbox, left),
]
for req in dist.batch_isend_irecv(ops):
    req.wait()
show("batch_isend_irecv", inbox.tolist())
if rank == 0:
    senders = sorted(dist.recv(torch.zeros(1)) for _ in range(k - 1))
    show("recv from any", senders)
else:
    dist.send(torch.tensor([float(rank)]), dst=0)

# async_op=True: the call returns at once, wait() finishes it
t = torch.ones(4) * rank
work = dist.all_reduce(t, async_op=True)
work.wait()
show("async all_reduce", t.tolist())
dist.barrier()

# a subgroup, and a device mesh
evens = dist.new_group(list(range(0, k, 2)))
if rank % 2 == 0:
    t = torch.tensor([rank])
    dist.all_reduce(t, group=evens)
    show("new_group evens", t.tolist())
shape = (2, k // 2) if k % 2 == 0 else (1, k)
mesh = init_device_mesh("cpu", shape, mesh_dim_names=("dp", "tp"))
t = torch.tensor([rank])
dist.all_reduce(t, group=mesh.get_group("tp"))
show("device mesh tp", t.tolist())
t = torch.tensor([rank])
dist.all_reduce(t, group=mesh.get_group("dp"))
show("device mesh dp", t.tolist())

objects = [None] * k
dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
show("all_gather_object", objects)
everyone = [None] * k if rank == 0 else None
dist.gather_object((rank, "hello"), everyone, dst=0)
show("gather_object", everyone)
mine = [None]
dist.scatter_object_list(mine, [{"shard": i} for i in range(k)] if rank == 0 else None, src=0)
show("scatter_object_list", mine)
config = [{"lr": 0.5}, "sgd"] if rank == 0 else [None, None]
dist.broadcast_object_list(config, src=0)
show("broadcast_object_list", config)

# data parallel by hand: each rank's gradient of a linear model, all-reduced and averaged
torch.manual_seed(0)
model = torch.nn.Linear(4, 2, bias=False, dtype=torch.float64)
with torch.no_grad():
    model.weight.copy_(torch.arange(8, dtype=torch.float64).reshape(2, 4) / 4)
x = torch.arange(8, dtype=torch.float64).reshape(2, 4) + rank
y = torch.ones(2, 2, dtype=torch.float64) * rank
for _ in range(2):
    model.zero_grad()
    ((model(x) - y) ** 2).sum().backward()
    dist.all_reduce(model.weight.grad)
    model.weight.grad /= k
    with torch.no_grad():
        model.weight -= 2.0**-10 * model.weight.grad
show("ddp by hand weight", model.weight.flatten().tolist())
dist.destroy_process_group()
