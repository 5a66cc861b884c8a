"""Job launchers that only start ranks (Slurm's srun and slurmstepd, MPI's mpirun / mpiexec /
orterun / prterun, Hydra's proxy) and Slurm's time limit, the clock that ends any job.

Facts from Slurm 23 (SLURM_JOB_END_TIME in the job's env), Open MPI 4-5, MPICH Hydra.
"""

from __future__ import annotations

from diag.frameworks.base import Clock, Pack

PACK = Pack(
    name="Job launchers (Slurm, mpirun, Hydra)",
    key="launchers",
    env=("SLURM_",),
    # They listen for their own control traffic (srun's I/O forwarding), never for work.
    launchers=frozenset(
        {"srun", "mpirun", "mpiexec", "orterun", "prterun", "hydra_pmi_proxy", "slurmstepd"}
    ),
    clocks=(
        Clock(
            name="Slurm's time limit",
            default_s=None,
            starts="absolute",
            action="kills",
            env="SLURM_JOB_END_TIME",
            knob="`--time` / `SLURM_JOB_END_TIME`",
            during_startup=True,
            source="Slurm 23 (SLURM_JOB_END_TIME: epoch seconds)",
        ),
    ),
    sources=("Slurm 23 srun(1) environment; Open MPI 5 mpirun(1)",),
)
