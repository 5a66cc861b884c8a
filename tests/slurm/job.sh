#!/bin/bash
# The Slurm test job: N tasks, each a Python rank with RANK/WORLD_SIZE from Slurm's task ids.
srun --ntasks="${SLURM_NTASKS}" bash -c \
  'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID exec "$DIAG_TEST_PYTHON" "$DIAG_TEST_RANK"'
