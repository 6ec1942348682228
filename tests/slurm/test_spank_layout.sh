#!/bin/bash
# Task layouts on three nodes (CLUSTER_NODES=3), where only some nodes can
# see that a layout is refused: --distribution=arbitrary puts rank 0 where
# SLURM_HOSTFILE's first line says, and MASTER_ADDR is the step's first
# node.  A layout with rank 0 on n1 runs whatever the order of the others;
# one with rank 0 on n2 is seen by n1 (no rank 0) and n2 (rank 0 off the
# first node) only: they end the whole step (spank/remote.c kill_step), so
# n3's task, which would wait for rank 0 until its rendezvous timeout,
# stops within seconds and srun fails with the refusal on stderr.
export CLUSTER_NODES=3
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
# shellcheck disable=SC2016 # expanded by the task's bash
lay='echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $SLURMD_NODENAME"'
printf 'n1\nn3\nn2\nn1\n' >hosts.ok && printf 'n2\nn1\nn3\n' >hosts.bad || fail "host files"
out=$(set -o pipefail; SLURM_HOSTFILE=$WORK/hosts.ok SRUN_BOUND=60 srun_bounded -n4 -m arbitrary --dl-job=env bash -c "$lay" 2>&1 |
	no_wait_lines | sort) ||
	fail "srun -m arbitrary (n1,n3,n2,n1): $out"
[ "$out" = "0 0 4 2 n1 n1
1 0 4 1 n1 n3
2 0 4 1 n1 n2
3 1 4 2 n1 n1" ] || fail "srun -m arbitrary (n1,n3,n2,n1): $out"
echo "ok   -m arbitrary on three nodes with rank 0 on the first node runs, ranks as the host file says"

# The waiting task: what a rank does while rank 0 never comes.
start=$SECONDS
out=$(SLURM_HOSTFILE=$WORK/hosts.bad SRUN_BOUND=30 srun_bounded -n3 -m arbitrary --dl-job=env \
	bash -c 'echo "rank $RANK started on $SLURMD_NODENAME"; sleep 120' 2>&1)
rc=$? took=$((SECONDS - start))
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "srun -m arbitrary with rank 0 on n2 (status $rc after ${took}s): $out"
# (Ending before SRUN_BOUND's 30 s, status not 124, is the proof: n3's task
# sleeps 120 s.  n1 and n2 both refuse, and the first ends the step on every
# node: the other's line is there only when its task_init ran before that,
# which a loaded machine does not promise, so one of the two is required.)
grep -q -e "dljob: rank 0 runs on this node (n2), not on the step's first node n1 (MASTER_ADDR)" \
	-e "dljob: rank 0 does not run on the step's first node n1" <<<"$out" ||
	fail "srun -m arbitrary with rank 0 on n2: no refusal on stderr: $out"
grep -q "rank 0 started\|rank 1 started" <<<"$out" && fail "a refused rank ran: $out"
echo "ok   -m arbitrary on three nodes with rank 0 on n2: refused, and n3's task ended in ${took}s (status $rc)"
nodes_idle
