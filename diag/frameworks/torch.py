"""PyTorch's core, outside torch.distributed: CUDA synchronisation, futures and streams,
``nn.Module``'s call wrappers, torch.compile (Dynamo, Inductor, Triton) and its compilers,
``torch.load``, torch's file batons (cpp_extension's build lock).

Facts from torch 2.4-2.9 (torch/cuda/streams.py, torch/futures/__init__.py,
torch/_dynamo, torch/_inductor, torch/utils/file_baton.py).
"""

from __future__ import annotations

from diag.frameworks.base import FrameSign, FrameWait, Pack

PACK = Pack(
    name="PyTorch",
    key="torch",
    # c10::Error's backtrace (c10/util/Exception.cpp, Backtrace.cpp): after "Exception raised
    # from F at FILE:LINE (most recent call first):" one line per native frame, and where the
    # Python frames were left out, a line saying so.
    backtrace_lines=(r"^frame #\d+: ", r"^<omitting python frames>$"),
    modules=("torch/",),
    frame_waits=(
        FrameWait(
            FrameSign(frozenset({"synchronize", "current_stream_synchronize"})), "synchronize"
        ),
    ),
    # c10d's logging wrappers and nn.Module's call path say nothing about where a thread is.
    wrapper_frames=frozenset({"_fn", "decorate_context", "_call_impl", "_wrapped_call_impl"}),
    # Completion polls on asynchronous device or collective work: "done yet?".
    completion_frames=(
        FrameSign(frozenset({"done", "wait", "value"}), ("torch/futures/__init__.py",)),
        FrameSign(frozenset({"query"}), ("torch/cuda/streams.py", "torch/xpu/streams.py")),
        FrameSign(frozenset({"is_completed", "isCompleted", "is_success"})),
    ),
    # A module's own forward/backward: model work between polls.
    work_files=("torch/nn/modules/",),
    startup_files=(
        (
            "compiling",
            (
                "torch/_dynamo/convert_frame.py",
                "torch/_dynamo/symbolic_convert.py",
                "torch/_dynamo/output_graph.py",
                "torch/_inductor/compile_fx.py",
                "torch/_inductor/codecache.py",
                "torch/_inductor/graph.py",
                "torch/_inductor/scheduler.py",
                "torch/_inductor/codegen/",
                "torch/_inductor/async_compile.py",
                "torch/_inductor/cpp_builder.py",
                "torch/_inductor/lowering.py",
                "torch/_functorch/aot_autograd.py",
                "triton/compiler/",
                "triton/runtime/build.py",
            ),
        ),
    ),
    startup_frames=(
        ("compiling", frozenset({"_compile"})),
        ("loading weights", frozenset({"load_state_dict"})),
    ),
    # What torch.compile, cpp_extension and Triton run: host and CUDA toolchains.
    compilers=frozenset(
        {
            "gcc",
            "g++",
            "cc",
            "c++",
            "cc1",
            "cc1plus",
            "as",
            "ld",
            "ld.bfd",
            "ld.gold",
            "ld.lld",
            "collect2",
            "clang",
            "clang++",
            "nvcc",
            "ptxas",
            "cicc",
            "fatbinary",
            "nvlink",
            "ninja",
        }
    ),
    compile_argv=(("triton", ("compile", "ptxas")),),
    loader_frames=(
        (FrameSign(frozenset({"load", "_load"}), ("torch/serialization.py",)), "torch.load"),
    ),
    plumbing_packages=frozenset({"torch", "triton", "numpy"}),
    # Inductor's generated kernels are torch's code, not the job's.
    library_files=("/torchinductor_", "torch/"),
    sources=("torch 2.6 torch/cuda/streams.py, torch/futures/__init__.py, torch/_inductor/",),
)
