# tests/slurm/spank.mk
