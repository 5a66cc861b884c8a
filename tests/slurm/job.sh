#!/bin/bash
# The Slurm test job: Python ranks with RANK/WORLD_SIZE from Slurm's task ids. By default one
# task per allocated task; DIAG_TEST_TASKS/DIAG_TEST_NODES run fewer (leaving nodes idle).
srun --ntasks="${DIAG_TEST_TASKS:-$SLURM_NTASKS}" --nodes="${DIAG_TEST_NODES:-$SLURM_NNODES}" bash -c \
  'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID exec "$DIAG_TEST_PYTHON" "$DIAG_TEST_RANK"'
