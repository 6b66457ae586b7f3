"""The heat equation on a 2-D grid, split over a Cartesian grid of ranks, with halo exchange.

Each rank owns a block of the grid plus a one-cell border (the halo) that holds copies of
its neighbours' edge cells.  Every time step it first swaps halos with the ranks above,
below, left and right (``Cart.Shift`` names them; ``comm.Sendrecv`` swaps; at the edge of
the domain ``Shift`` gives ``MPI.PROC_NULL`` and nothing moves, so the border stays at 0),
then updates its own cells with the explicit 5-point stencil

    u[i, j] += alpha * (u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1] - 4 u[i, j])

The result equals one process running the same loop on the whole grid (rank 0 gathers the
blocks and prints the checksum).  This is the standard first MPI domain decomposition:
MPI_Dims_create (``MPI.Compute_dims``), MPI_Cart_create, MPI_Cart_shift, MPI_Sendrecv.

Plain mpi4py; run it unchanged (arguments: grid rows, columns, time steps):

    mpirun -n 4 python examples/mpi_heat_stencil.py 16 24 50
    collsim exec -n 4 examples/mpi_heat_stencil.py 16 24 50
"""

import sys

import numpy as np
from mpi4py import MPI

given = [int(a) for a in sys.argv[1:4]]
ROWS, COLS, STEPS = given + [16, 24, 50][len(given) :]
ALPHA = 0.1  # diffusion number: stable for alpha <= 1/4 on a 5-point stencil

world = MPI.COMM_WORLD
dims = MPI.Compute_dims(world.Get_size(), 2)  # e.g. 4 ranks -> a 2 x 2 grid of ranks
if ROWS % dims[0] or COLS % dims[1]:
    sys.exit(f"a {ROWS} x {COLS} grid does not split evenly over {dims[0]} x {dims[1]} ranks")
cart = world.Create_cart(dims, periods=[False, False])
row, col = cart.Get_coords(cart.Get_rank())
n, m = ROWS // dims[0], COLS // dims[1]  # the block each rank owns


def initial(rows, cols):
    """A hot square in the middle of a cold plate (the whole grid, as one process has it)."""
    u = np.zeros((rows, cols))
    u[rows // 4 : 3 * rows // 4, cols // 4 : 3 * cols // 4] = 100.0
    return u


u = np.zeros((n + 2, m + 2))  # own block plus a one-cell halo on every side
u[1:-1, 1:-1] = initial(ROWS, COLS)[row * n : (row + 1) * n, col * m : (col + 1) * m]
up, down = cart.Shift(0, 1)  # source, dest of a shift by +1 along the rows
left, right = cart.Shift(1, 1)


def swap(send, dest, source, size):
    """Send ``send`` to ``dest`` while receiving ``size`` values from ``source``; None when
    ``source`` is MPI.PROC_NULL (the domain's edge: nothing comes, the border stays 0)."""
    got = np.empty(size)
    cart.Sendrecv(np.ascontiguousarray(send), dest=dest, recvbuf=got, source=source)
    return None if source == MPI.PROC_NULL else got


for _ in range(STEPS):
    # my first row goes up and my bottom halo comes from below; then the other way round
    if (got := swap(u[1], up, down, m + 2)) is not None:
        u[-1] = got
    if (got := swap(u[-2], down, up, m + 2)) is not None:
        u[0] = got
    # columns are strided in memory: swap() sends a contiguous copy
    if (got := swap(u[:, 1], left, right, n + 2)) is not None:
        u[:, -1] = got
    if (got := swap(u[:, -2], right, left, n + 2)) is not None:
        u[:, 0] = got
    inner = u[1:-1, 1:-1]
    inner += ALPHA * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * inner)

blocks = cart.gather(u[1:-1, 1:-1].copy(), root=0)
if cart.Get_rank() == 0:
    whole = np.block([[blocks[r * dims[1] + c] for c in range(dims[1])] for r in range(dims[0])])
    print(f"{ROWS} x {COLS} grid on {dims[0]} x {dims[1]} ranks, {STEPS} steps")
    print(f"total heat {whole.sum():.6f}, peak {whole.max():.6f}")
