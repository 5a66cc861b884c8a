"""Loaded by ``.venv-sglang``'s ``diag_sglang_cpu.pth`` at interpreter start (``make sglang-venv``).

PyPI's ``torchvision==0.28.0`` is a CUDA build: its ``_C`` extension does not load beside the
CPU torch, so ``torchvision/_meta_registrations.py``, which registers meta kernels for its
``torchvision::nms``/``roi_align`` ops, fails with "operator torchvision::nms does not exist" on
``import torchvision``. SGLang imports ``torchvision.transforms`` (image processors), never those
ops, so an empty module stands in for the meta registrations. Nothing else is changed.
"""

import sys
import types

_NAME = "torchvision._meta_registrations"
sys.modules.setdefault(_NAME, types.ModuleType(_NAME))
