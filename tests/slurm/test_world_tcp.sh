#!/bin/bash
# srun --mpi=none on the private 2-node cluster: the TCP world from Slurm's
# variables alone (MASTER_ADDR from the step's node list, MASTER_PORT from
# the job and step ids), then from torchrun-style RANK/WORLD_SIZE/MASTER_*
# as the SPANK plugin exports them; exact sums on all 4 ranks, 2 per node.
set -u
# shellcheck source=world/test/world_lib.sh
source "$DLJOB_SRCDIR/world/test/world_lib.sh"
cluster_up 4

clean_srun() { clean_env SLURM_CONF="$SLURM_CONF" srun "$@"; }

clean_srun --jobid="$JOB" -N2 -n4 --mpi=none "$WC" --timeout 30 >"$WTMP/slurm" 2>&1 ||
	fail "srun --mpi=none: $(cat "$WTMP/slurm")"
check_ok "$WTMP/slurm" 4 tcp 2

port=$(free_port) || fail "no free port"
clean_srun --jobid="$JOB" -N2 -n4 --mpi=none bash -c \
	"RANK=\$SLURM_PROCID WORLD_SIZE=\$SLURM_NTASKS MASTER_ADDR=n1 MASTER_PORT=$port \
	 exec env -u SLURM_PROCID -u SLURM_STEP_NUM_TASKS '$WC' --timeout 30" >"$WTMP/torchrun" 2>&1 ||
	fail "srun with RANK/MASTER_*: $(cat "$WTMP/torchrun")"
check_ok "$WTMP/torchrun" 4 tcp 2

# The world must not hang on to the port: the same step again, same port.
clean_srun --jobid="$JOB" -N2 -n4 --mpi=none bash -c \
	"RANK=\$SLURM_PROCID WORLD_SIZE=\$SLURM_NTASKS MASTER_ADDR=n1 MASTER_PORT=$port \
	 exec '$WC' --timeout 30 --steps 1" >"$WTMP/again" 2>&1 ||
	fail "second run on port $port: $(cat "$WTMP/again")"
check_ok "$WTMP/again" 4 tcp 2
nodes_idle
echo "PASS: TCP world under srun from SLURM_* and from RANK/MASTER_*"
exit 0
