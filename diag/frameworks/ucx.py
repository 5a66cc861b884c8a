"""UCX (Unified Communication X): the transport under Open MPI's ``pml ucx``, MPICH's ch4:ucx,
UCC, NVIDIA's UCX-Py / Dask-CUDA and RAPIDS shuffles.

Its worker is polled: a request completes only while somebody calls ``ucp_worker_progress``,
which runs each transport's ``uct_*_progress`` (shared memory ``uct_mm_iface_progress``, RC/DC
verbs ``uct_rc_*_progress``, TCP ``uct_tcp_iface_progress``). A thread waiting for a message
spins there at 100% of a core; UCX's own ``ucs_async`` thread sleeps in epoll.
"""

from __future__ import annotations

from diag.frameworks.base import NativeProgress, Pack

PACK = Pack(
    name="UCX",
    key="ucx",
    modules=("ucp/", "ucxx/", "ucp/_libs/"),
    env=("UCX_",),
    native=(
        NativeProgress(
            libraries=("libucp.so", "libuct.so", "libucs.so", "libuct_"),
            symbols=frozenset(
                {
                    "ucp_worker_progress",
                    "ucp_worker_wait",
                    "ucp_request_check_status",
                    "ucp_tag_probe_nb",
                    "uct_worker_progress",
                    "uct_*_progress",
                    "uct_*_iface_progress",
                    "ucs_callbackq_*",
                }
            ),
            what="UCX's worker progress polls for a message",
        ),
    ),
    sources=(
        "openucx/ucx src/ucp/core/ucp_worker.c: ucp_worker_progress (uct_worker_progress over "
        "the worker's callback queue), ucp_worker_wait",
        "openucx/ucx src/uct/base/uct_worker.c: the progress_q callback queue "
        "(ucs_callbackq_*), and each transport's uct_*_iface_progress",
        "pmodels/mpich src/mpid/ch4/netmod/ucx/ucx_progress.h: MPIDI_NM_progress calls "
        "ucp_worker_progress - MPICH over UCX spins there",
        "measured here (tests/test_native_waits_real.py, Debian's Open MPI 4.1.4 with "
        "pml=ucx, UCX_TLS=sm,self): ranks in MPI_Recv/MPI_Barrier spin in libucp's "
        "ucp_worker_progress and ucp_tag_probe_nb, libuct, mca_pml_ucx_progress",
    ),
)
