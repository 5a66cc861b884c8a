"""MPI (Open MPI, MPICH and its derivatives: Intel MPI, MVAPICH, Cray MPICH): the message
passing library of HPC jobs, mpi4py programs, Horovod and DeepSpeed's MPI launcher.

A blocking receive, wait or collective in MPI does not sleep: the calling thread spins in the
library's progress engine (Open MPI's ``opal_progress`` under ``ompi_request_default_wait`` /
``ompi_sync_wait_mt``, driving its transports' component progress - ``mca_btl_vader``,
``mca_pml_ob1``; MPICH's ``MPID_Progress_wait`` / ``MPIDI_progress_test``), 100% of a core,
until the message comes. py-spy shows only the Python line that called in (mpi4py's methods
are Cython). That CPU is a wait on a peer: a job whose ranks all sit there is deadlocked.
"""

from __future__ import annotations

from diag.frameworks.base import NativeProgress, Pack

PACK = Pack(
    name="MPI (Open MPI, MPICH)",
    key="mpi",
    modules=("mpi4py/",),
    # Set in every rank by the launchers (Open MPI's ORTE/PRRTE, MPICH's Hydra, PMIx).
    env=("OMPI_COMM_WORLD_", "PMIX_RANK", "PMI_RANK", "MPI_LOCALRANKID"),
    native=(
        NativeProgress(
            libraries=("libopen-pal.so", "libmpi.so"),
            symbols=frozenset(
                {
                    "opal_progress",
                    "ompi_sync_wait_mt",
                    "ompi_request_default_wait*",
                    "ompi_request_default_test*",
                    "ompi_coll_base_*",
                    "PMPI_Recv",
                    "PMPI_Wait*",
                    "PMPI_Barrier",
                    "PMPI_Probe",
                    "MPI_Recv",
                    "MPI_Wait*",
                    "MPI_Barrier",
                }
            ),
            what="Open MPI's progress engine polls for a message",
        ),
        # Open MPI's transport and messaging components: every instruction there moves or
        # looks for a message (their progress functions are static: no symbol to name).
        NativeProgress(
            libraries=("mca_btl_", "mca_pml_", "mca_mtl_", "mca_coll_", "mca_osc_"),
            what="an Open MPI transport polls for a message",
        ),
        NativeProgress(
            libraries=("libmpich.so", "libmpi.so", "libmpi_intel.so"),
            symbols=frozenset(
                {
                    "MPID_Progress_wait",
                    "MPID_Progress_test",
                    "MPIDI_progress_test",
                    "MPIDI_Progress_test",
                    "MPIDI_CH3I_Progress",
                    "MPIR_Wait*",
                    "MPIR_Barrier*",
                    "MPIC_Wait",
                    "MPIC_Recv",
                }
            ),
            what="MPICH's progress engine polls for a message",
        ),
    ),
    sources=(
        "open-mpi/ompi v4.1 opal/runtime/opal_progress.c: opal_progress() calls every "
        "registered component progress (callbacks[]) and sched_yield() when "
        "opal_progress_yield_when_idle (mpi_yield_when_idle: set under --oversubscribe)",
        "open-mpi/ompi v4.1 ompi/request/req_wait.c: ompi_request_default_wait*, and "
        "opal/threads/wait_sync.c: ompi_sync_wait_mt (while (sync->count > 0) opal_progress())",
        "Debian bookworm openmpi 4.1.4: `nm -D` of libopen-pal.so.40 and libmpi.so.40 exports "
        "opal_progress, ompi_sync_wait_mt, ompi_request_default_wait*, PMPI_Recv; the btl/pml "
        "components are plugins under openmpi/lib/openmpi3/ (mca_btl_vader.so, mca_pml_ob1.so)",
        "pmodels/mpich src/mpid/ch4/src/ch4_progress.c: MPIDI_progress_test, MPID_Progress_wait "
        "(loops on MPIDI_progress_test until progress_made); ch3: MPIDI_CH3I_Progress",
        "measured here (tests/test_native_waits_real.py): a rank in MPI_Recv spins in "
        "mca_btl_vader.so and libopen-pal's opal_progress, /proc syscall reads 'running'",
    ),
)
