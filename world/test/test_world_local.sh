#!/bin/bash
# The world without Slurm: a single process; 3 local processes joined by
# RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (TCP) with exact sums; a rank
# killed mid-run, a rank that hangs and a rank that never starts all end
# every other rank with an error naming it, in bounded time; bad variables
# are refused by name.
set -u
# shellcheck source=world/test/world_lib.sh
source "$DLJOB_SRCDIR/world/test/world_lib.sh"

# run_local N OUT [world_check options]: N ranks on 127.0.0.1; returns the
# worst exit status.
run_local() {
	local n=$1 out=$2 port r rc=0 pids=()
	shift 2
	port=$(free_port) || fail "no free port"
	: >"$out"
	for r in $(seq 0 $((n - 1))); do
		"${CLEAN_ENV[@]}" RANK="$r" WORLD_SIZE="$n" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
			"$WC" "$@" >>"$out" 2>&1 &
		pids+=($!)
		BG_PIDS+=($!)
	done
	for r in "${pids[@]}"; do
		wait "$r" || rc=$?
	done
	return $rc
}

# Single process: no variables at all.
clean_env "$WC" --expect-method single --expect-size 1 >"$WTMP/single" 2>&1 ||
	fail "single process: $(cat "$WTMP/single")"
check_ok "$WTMP/single" 1 single 1

# Three local processes over TCP.
run_local 3 "$WTMP/tcp3" --timeout 20 --steps 2 || fail "3 local ranks: $(cat "$WTMP/tcp3")"
check_ok "$WTMP/tcp3" 3 tcp 3

# WORLD_SIZE=1 is a single process too (no rendezvous, nobody listens).
run_local 1 "$WTMP/tcp1" --expect-method single || fail "WORLD_SIZE=1: $(cat "$WTMP/tcp1")"

# A rank killed mid-run: the others name it and stop, fast (well before
# their 60 s timeout; the bound leaves a loaded machine room).
for dead in 1 0; do
	start=$SECONDS
	run_local 3 "$WTMP/die$dead" --timeout 60 --steps 3 --die-at-step 1 --rank $dead &&
		fail "killing rank $dead: all exited 0: $(cat "$WTMP/die$dead")"
	[ $((SECONDS - start)) -lt 40 ] || fail "killing rank $dead: took $((SECONDS - start)) s (timeout 60 s)"
	check_failed "$WTMP/die$dead" 3 "$dead"
done

# A rank that stops early on its own (closes the world and exits 1, as
# dljob after a local error): the others stop at once, naming it.
for gone in 2 0; do
	start=$SECONDS
	run_local 3 "$WTMP/leave$gone" --timeout 60 --steps 3 --leave-at-step 1 --rank $gone &&
		fail "rank $gone left: all exited 0: $(cat "$WTMP/leave$gone")"
	[ $((SECONDS - start)) -lt 40 ] || fail "rank $gone left: the others took $((SECONDS - start)) s (timeout 60 s)"
	for r in 0 1 2; do
		[ $r = $gone ] && continue
		grep -q "^world_check: rank $r: .*rank $gone (.*) left the job after" "$WTMP/leave$gone" ||
			fail "rank $r did not name rank $gone as gone: $(cat "$WTMP/leave$gone")"
	done
done

# A rank that hangs (sleeps in the middle of the collectives): the others
# time out, and rank 0 names the one that never reported waiting (or, when
# rank 0 hangs, the others name rank 0).
for hung in 1 0; do
	port=$(free_port) || fail "no free port"
	out=$WTMP/hang$hung
	: >"$out"
	pids=()
	for r in 0 1 2; do
		"${CLEAN_ENV[@]}" RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
			"$WC" --timeout 3 --steps 3 --hang-at-step 1 --rank $hung >>"$out" 2>&1 &
		pids+=($!)
		BG_PIDS+=($!)
	done
	start=$SECONDS
	for r in 0 1 2; do
		[ $r = $hung ] && continue
		wait "${pids[$r]}" && fail "rank $r passed while rank $hung hung: $(cat "$out")"
	done
	took=$((SECONDS - start))
	kill -9 "${pids[$hung]}" 2>/dev/null
	wait "${pids[$hung]}" 2>/dev/null
	[ $took -lt 30 ] || fail "rank $hung hung: the others took $took s with a 3 s timeout"
	for r in 0 1 2; do
		[ $r = $hung ] && continue
		grep -q "^world_check: rank $r: .*rank $hung (.*did not answer" "$out" ||
			fail "rank $r did not name the hung rank $hung: $(cat "$out")"
	done
done

# A rank that never starts: the others wait only --timeout, and name it.
port=$(free_port) || fail "no free port"
start=$SECONDS
pids=()
for r in 0 1; do
	"${CLEAN_ENV[@]}" RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		"$WC" --timeout 3 >>"$WTMP/missing" 2>&1 &
	pids+=($!)
	BG_PIDS+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" && fail "a rank passed with rank 2 missing: $(cat "$WTMP/missing")"
done
[ $((SECONDS - start)) -lt 30 ] || fail "missing rank: took $((SECONDS - start)) s for a 3 s timeout"
[ "$(grep -c "rank 2 (of 3) never joined" "$WTMP/missing")" -eq 2 ] ||
	fail "missing rank 2 not named by both ranks: $(cat "$WTMP/missing")"

# Bad variables are refused, naming the variable.
clean_env RANK=0 "$WC" >"$WTMP/bad1" 2>&1 && fail "RANK without WORLD_SIZE accepted"
grep -q "RANK is set but WORLD_SIZE is not" "$WTMP/bad1" || fail "bad message: $(cat "$WTMP/bad1")"
clean_env RANK=3 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "$WC" >"$WTMP/bad2" 2>&1 &&
	fail "RANK=3 of 2 accepted"
grep -q "rank 3 is not below the world size 2" "$WTMP/bad2" || fail "bad message: $(cat "$WTMP/bad2")"
clean_env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "$WC" >"$WTMP/bad3" 2>&1 &&
	fail "no MASTER_PORT accepted"
grep -q "MASTER_PORT is not" "$WTMP/bad3" || fail "bad message: $(cat "$WTMP/bad3")"
clean_env DLJOB_WORLD=mpi "$WC" >"$WTMP/bad4" 2>&1 && fail "DLJOB_WORLD=mpi accepted"
grep -q "DLJOB_WORLD='mpi'" "$WTMP/bad4" || fail "bad message: $(cat "$WTMP/bad4")"
echo "PASS: single, 3 local TCP ranks, killed, leaving, hung and missing ranks, bad variables"
exit 0
