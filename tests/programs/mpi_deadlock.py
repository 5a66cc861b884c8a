"""Two MPI ranks that deadlock in MPI's progress engine: rank 1 waits in MPI_Recv for a message
rank 0 never sends, rank 0 waits in MPI_Barrier for rank 1. Both spin a core in Open MPI's
``opal_progress`` (tests/test_native_waits_real.py)."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
comm.Barrier()  # both ranks are up
if rank == 0:
    print("READY", flush=True)
    comm.Barrier()  # rank 1 never joins
else:
    comm.recv(source=0, tag=7)  # rank 0 never sends
