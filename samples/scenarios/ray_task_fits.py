"""slow or progressing: the contrast of ``ray_task_never_fits`` - the same embedding step
asks for one CPU, Ray places it, and its worker computes while the driver waits."""

from __future__ import annotations

from ray_task_never_fits import run

if __name__ == "__main__":
    run(gpus=0)
