#!/bin/bash
# A rank killed in the middle of the collectives, under srun, with PMIx+MPI
# and with TCP: every other rank stops with an error naming the dead rank
# well within 30 s, srun exits non-zero, and both nodes are usable again
# (never drained).  Ranks 2 (a rank on the second node) and 0 (the hub).
set -u
# shellcheck source=tests/slurm/world_lib.sh
source "$DLJOB_SRCDIR/tests/slurm/world_lib.sh"
cluster_up 4

clean_srun() { clean_env SLURM_CONF="$SLURM_CONF" OMPI_MCA_btl="$OMPI_MCA_btl" srun "$@"; }

for mpi in pmix none; do
	for dead in 2 0; do
		out=$WTMP/$mpi.$dead
		start=$SECONDS
		clean_srun --jobid="$JOB" -N2 -n4 --mpi=$mpi "$WC" --timeout 20 --steps 4 \
			--die-at-step 2 --rank $dead >"$out" 2>&1 &&
			fail "--mpi=$mpi, rank $dead killed: srun exited 0: $(cat "$out")"
		took=$((SECONDS - start))
		[ $took -lt 30 ] || fail "--mpi=$mpi, rank $dead killed: took $took s"
		check_failed "$out" 4 $dead
		nodes_usable
		echo "--mpi=$mpi, rank $dead killed: the others stopped in $took s"
	done
done
nodes_idle
echo "PASS: killed ranks are named and end the job, for PMIx and TCP"
exit 0
