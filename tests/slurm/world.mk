# tests/slurm/world.mk
