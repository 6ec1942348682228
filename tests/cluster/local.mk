# tests/cluster: the private Slurm cluster the Slurm-facing tests run on.
TESTS += tests/cluster/test_cluster.sh tests/cluster/test_netns.sh
dist_check_SCRIPTS += tests/cluster/test_cluster.sh tests/cluster/test_netns.sh
