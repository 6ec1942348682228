# tests/slurm/dataparallel.mk: data-parallel training correctness on the private cluster.
TESTS += tests/slurm/test_dataparallel.sh
dist_check_SCRIPTS += tests/slurm/test_dataparallel.sh
