# tests/slurm/dataparallel.mk: data-parallel training correctness on the private cluster.
TESTS += tests/slurm/test_dataparallel.sh
dist_check_SCRIPTS += tests/slurm/test_dataparallel.sh
# dljob report on runs at 1, 2 and 4 ranks, recomputed from their metrics.
TESTS += tests/slurm/test_report_cluster.sh
dist_check_SCRIPTS += tests/slurm/test_report_cluster.sh
