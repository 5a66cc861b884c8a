"""Two MPI ranks exchanging messages in a loop, a step logged every 10 round trips: rank 0
spins in MPI_Recv while rank 1 works a little - healthy, progressing
(tests/test_native_waits_real.py). argv[1]: the log file."""

import sys
import time
from typing import Optional, TextIO

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()


def exchange(log: Optional[TextIO]) -> None:
    step = 0
    while True:
        if rank == 0:
            comm.send(step, dest=1, tag=1)
            comm.recv(source=1, tag=2)
        else:
            got = comm.recv(source=0, tag=1)
            time.sleep(0.02)  # rank 1 works; rank 0 spins in its receive meanwhile
            comm.send(got, dest=0, tag=2)
        step += 1
        if log is not None and step % 10 == 0:
            log.write(f"step {step}\n")
            log.flush()
        if rank == 0 and step == 20:
            print("READY", flush=True)


if rank == 0:
    with open(sys.argv[1], "a") as out:
        exchange(out)
else:
    exchange(None)
