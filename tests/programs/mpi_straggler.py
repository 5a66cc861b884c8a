"""Two MPI ranks, one a straggler: rank 0 computes in Python for a long time before it sends,
rank 1 spins in MPI_Recv meanwhile - slow, not deadlocked: rank 0 works, rank 1 waits for it
(tests/test_native_waits_real.py)."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
comm.Barrier()
if rank == 0:
    print("READY", flush=True)
    total = 0
    for i in range(10**10):
        total += i * i
    comm.send(total, dest=1)
else:
    comm.recv(source=0)
