#!/bin/bash
# A rank killed in the middle of the collectives, under srun, with PMIx+MPI
# and with TCP: every other rank stops with an error naming the dead rank
# (not its timeout's "did not answer"), srun exits non-zero, and both nodes
# are usable again (never drained).  Ranks 2 (a rank on the second node)
# and 0 (the hub).
# Then a rank that hangs instead of dying: named after the --timeout; and a
# rank that hangs inside MPI_Init_thread or MPI_Finalize.  The time bounds
# only prove that nothing hangs or waits for a longer timeout: they include
# the step's start, which a loaded machine (make -j check, two clusters)
# may stretch to many seconds.
set -u
# shellcheck source=world/test/world_lib.sh
source "$DLJOB_SRCDIR/world/test/world_lib.sh"
cluster_up 4

# clean_env keeps OMPI_MCA_* from world_lib.sh; SLURM_CONF must be passed.
clean_srun() { clean_env SLURM_CONF="$SLURM_CONF" srun "$@"; }

for mode in pmix none pmix-ring; do
	mpi=${mode%-ring}
	coll=mpi
	[ "$mode" = pmix-ring ] && coll=ring
	for dead in 2 0; do
		out=$WTMP/$mode.$dead
		start=$SECONDS
		clean_srun --jobid="$JOB" -N2 -n4 --mpi="$mpi" --export=ALL,DLJOB_COLLECTIVES="$coll" \
			"$WC" --timeout 20 --steps 4 --die-at-step 2 --rank $dead >"$out" 2>&1 &&
			fail "$mode, rank $dead killed: srun exited 0: $(cat "$out")"
		took=$((SECONDS - start))
		[ $took -lt 90 ] || fail "$mode, rank $dead killed: took $took s"
		check_failed "$out" 4 $dead
		nodes_usable
		echo "$mode, rank $dead killed: the others stopped in $took s"
	done
done
# A rank that stops early on its own (closes the world, exits 1, as dljob
# does after a local error) under PMIx + MPI: the others stop at once.
out=$WTMP/pmix.leave
start=$SECONDS
# (--timeout 60: waiting for it instead would pass the 45 s bound.)
clean_srun --jobid="$JOB" -N2 -n4 --mpi=pmix "$WC" --timeout 60 --steps 3 \
	--leave-at-step 1 --rank 2 >"$out" 2>&1 && fail "rank 2 left: srun exited 0: $(cat "$out")"
took=$((SECONDS - start))
[ $took -lt 45 ] || fail "rank 2 left: the others took $took s (timeout 60 s)"
for r in 0 1 3; do
	grep -q "^world_check: rank $r: .*rank 2 (n2) left the job after" "$out" ||
		fail "pmix: rank $r did not name rank 2 as gone: $(cat "$out")"
done
nodes_usable
echo "--mpi=pmix, rank 2 left early: the others stopped in $took s"

# A hung rank (alive, never answering): the others time out, name it, and
# exit 1; srun --wait=5 then ends it too.  (Not -K: the first rank to exit
# would end the step at once, and a rank that had the verdict but had not
# printed it yet, as happens on a loaded machine, would be killed first.)
for mpi in pmix none; do
	out=$WTMP/$mpi.hang
	start=$SECONDS
	# (--timeout 10, not less: the others' MPI_Init, under load, must not
	# be what times out.)
	clean_srun --jobid="$JOB" --wait=5 -N2 -n4 --mpi=$mpi "$WC" --timeout 10 --steps 3 \
		--hang-at-step 1 --rank 3 >"$out" 2>&1 &&
		fail "--mpi=$mpi, rank 3 hung: srun exited 0: $(cat "$out")"
	took=$((SECONDS - start))
	[ $took -lt 60 ] || fail "--mpi=$mpi, rank 3 hung: took $took s (timeout 10 s)"
	for r in 0 1 2; do
		grep -q "^world_check: rank $r: .*rank 3 (n2) did not answer" "$out" ||
			fail "--mpi=$mpi: rank $r did not name the hung rank 3: $(cat "$out")"
	done
	nodes_usable
	echo "--mpi=$mpi, rank 3 hung: the others named it and stopped in $took s"
done
# A rank that hangs inside MPI_Init_thread or MPI_Finalize (an LD_PRELOAD
# shim): the watchdog names the stage and ends it within the timeout.
# (-K here: in MPI_Finalize rank 0 ends with status 0, and --wait would
# end rank 1 before its watchdog.)
shim=$DLJOB_BUILDDIR/tests/slurm/.libs/libmpihang.so
[ -f "$shim" ] || fail "no $shim"
for stage in init finalize; do
	out=$WTMP/mpi.$stage
	start=$SECONDS
	# (timeout: without a watchdog this would hang for ever)
	timeout 120 "${CLEAN_ENV[@]}" SLURM_CONF="$SLURM_CONF" srun --jobid="$JOB" -N2 -n2 -K \
		--mpi=pmix --export=ALL,LD_PRELOAD="$shim",MPIHANG_STAGE=$stage,MPIHANG_RANK=1 \
		"$WC" --timeout 10 --steps 1 >"$out" 2>&1 &&
		fail "rank 1 hung in MPI $stage: srun exited 0: $(cat "$out")"
	took=$((SECONDS - start))
	[ $took -lt 60 ] || fail "rank 1 hung in MPI $stage: took $took s (timeout 10 s)"
	want=MPI_Init_thread
	[ $stage = finalize ] && want=MPI_Finalize
	grep -q "dljob: rank 1: $want did not return within the timeout" "$out" ||
		fail "rank 1 hung in $want was not named: $(cat "$out")"
	nodes_usable
	echo "--mpi=pmix, rank 1 hung in $want: named, the step ended in $took s"
done
nodes_idle
echo "PASS: killed and hung ranks are named and end the job, for PMIx and TCP"
exit 0
