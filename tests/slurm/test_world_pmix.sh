#!/bin/bash
# srun --mpi=pmix on the private 2-node cluster: the PMIx world (rank, size
# and local rank from PMIx, blobs by PMIx fence, allreduce by Open MPI) gives
# exact sums, the same bits everywhere, on 4 ranks 2 per node; again with
# DLJOB_COLLECTIVES=ring (PMIx bootstrap, TCP ring collectives); and 1 rank.
set -u
# shellcheck source=world/test/world_lib.sh
source "$DLJOB_SRCDIR/world/test/world_lib.sh"
cluster_up 4

# clean_env keeps OMPI_MCA_* from world_lib.sh; SLURM_CONF must be passed.
clean_srun() { clean_env SLURM_CONF="$SLURM_CONF" srun "$@"; }

clean_srun --jobid="$JOB" -N2 -n4 --mpi=pmix "$WC" --timeout 30 >"$WTMP/pmix4" 2>&1 ||
	fail "srun -N2 -n4 --mpi=pmix: $(cat "$WTMP/pmix4")"
check_ok "$WTMP/pmix4" 4 pmix 2

# The same with the TCP ring instead of Open MPI for the collectives.
clean_srun --jobid="$JOB" -N2 -n4 --mpi=pmix --export=ALL,DLJOB_COLLECTIVES=ring \
	"$WC" --timeout 30 >"$WTMP/ring4" 2>&1 ||
	fail "srun -N2 -n4 --mpi=pmix, DLJOB_COLLECTIVES=ring: $(cat "$WTMP/ring4")"
check_ok "$WTMP/ring4" 4 pmix 2

clean_srun --jobid="$JOB" -N1 -n1 --mpi=pmix "$WC" --timeout 30 >"$WTMP/pmix1" 2>&1 ||
	fail "srun -n1 --mpi=pmix: $(cat "$WTMP/pmix1")"
check_ok "$WTMP/pmix1" 1 pmix 1
nodes_idle
echo "PASS: PMIx world under srun --mpi=pmix"
exit 0
