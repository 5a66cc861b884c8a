"""CUDA on the host, and NCCL's host-side threads.

The CUDA runtime's default synchronisation spins: ``cudaStreamSynchronize``,
``cudaDeviceSynchronize``, ``cudaEventSynchronize`` and a synchronous ``cudaMemcpy`` poll the
device from the calling thread (state R, 100% of a core) until the GPU's work is done -
``cudaDeviceScheduleSpin``/``Auto``; only ``cudaDeviceScheduleBlockingSync`` sleeps. On a rank
whose kernel waits for a NCCL peer that never arrives, that spin is the wait, not work. NCCL's
proxy progress thread (``ncclProxyProgress``, named "NCCL Progress" when
``NCCL_SET_THREAD_NAME=1``) polls the network for the GPU's collectives the same way.
"""

from __future__ import annotations

from diag.frameworks.base import NativeProgress, Pack

PACK = Pack(
    name="CUDA and NCCL (host side)",
    key="cuda",
    native=(
        NativeProgress(
            libraries=("libcudart.so", "libcuda.so"),
            symbols=frozenset(
                {
                    "cudaStreamSynchronize",
                    "cudaDeviceSynchronize",
                    "cudaEventSynchronize",
                    "cudaStreamWaitEvent",
                    "cudaMemcpy",
                    "cuStreamSynchronize",
                    "cuCtxSynchronize",
                    "cuEventSynchronize",
                    "cuMemcpyDtoH*",
                }
            ),
            what="the CUDA runtime spins on the host until the GPU's work is done",
        ),
        # torch's own synchronize helpers (C++, mangled): what the spin is reached through.
        NativeProgress(
            libraries=("libc10_cuda.so", "libtorch_cuda.so"),
            symbols=frozenset(
                {
                    "_ZN3c104cuda17device_synchronize*",
                    "_ZN3c104cuda10CUDAStream11synchronize*",
                    "_ZN2at4cuda16stream_synchronize*",
                }
            ),
            what="torch waits for the GPU (a CUDA synchronize spinning on the host)",
        ),
        NativeProgress(
            libraries=("libnccl.so",),
            symbols=frozenset({"ncclProxyProgress", "progressOps", "*ProxyProgress"}),
            thread_names=("NCCL Progress", "NCCL GIN Progres"),
            what="NCCL's proxy thread polls the network for its collectives",
        ),
    ),
    sources=(
        "CUDA Runtime API, cudaSetDeviceFlags: cudaDeviceScheduleAuto/Spin/Yield/BlockingSync "
        "- spin-waiting is the default when active contexts <= logical CPUs",
        "NVIDIA/nccl src/proxy.cc: void* ncclProxyProgress(...) loops over progressOps "
        "while state->stop == 0; names its thread 'NCCL Progress%2d' (ncclSetThreadName, only "
        "with NCCL_SET_THREAD_NAME=1, src/debug.cc); 'NCCL GIN Progress%2d' in newer NCCL",
        "pytorch c10/cuda/CUDAFunctions.cpp: c10::cuda::device_synchronize; c10/cuda/"
        "CUDAStream.h: CUDAStream::synchronize -> cudaStreamSynchronize",
        "on paper only: no GPU on this machine; the attribution itself is tested with MPI",
    ),
)
