#!/bin/bash
# The plan within the step's CPUs under task/cgroup ConstrainCores=yes
# (cgroup v1): Slurm puts slurmstepd in the step's cpuset before
# spank user_init, and dljob reads the step's CPUs from its affinity too.
# A node shared with another job (shared_node_check, test_spank_lib.bash):
# the table's title names slurmstepd's cpuset, and no task is planned or
# bound on the other job's core.
for c in devices cpuset; do
	[ -d /sys/fs/cgroup/$c ] && [ -f /sys/fs/cgroup/$c/tasks ] || {
		echo "SKIP: no cgroup v1 $c controller at /sys/fs/cgroup/$c (needed by Slurm's cgroup/v1)"
		exit 77
	}
done
export CLUSTER_CGROUP=1 CLUSTER_CONSTRAIN_CORES=1
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
probe='echo "rank=$RANK gpu=${DLJOB_GPU-} cpus=${DLJOB_CPUS-} affinity=$(sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status)"'
cluster_plugstack ""
shared_node_check "slurmstepd.s cpuset [0-9,-]+"
nodes_idle
