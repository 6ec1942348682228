#!/bin/bash
# Hostile and broken peers of the TCP rendezvous, on loopback (issue 19,
# findings 6-9): an impostor claiming a rank, a rogue rank 0 on MASTER_PORT,
# strangers on the ring listeners, idle and partial connections, a member
# with an out-of-range rank, a rank that dies between the table and the
# ring, another program on MASTER_PORT, three rendezvous on one
# MASTER_PORT (issue 15), MASTER_ADDR spelled differently,
# absurd world sizes and SIGTERM during the rendezvous.  Every honest rank
# either finishes with exact sums (world_check checks every allreduce: no
# stranger's byte reached them) or stops within a few seconds naming the
# cause; the timeout is 60 s, so a wait for it fails the time bounds (20 to
# 45 s: far above what the cases take on a loaded machine, which may be
# several seconds; they were 6 to 15 s under a 20 s timeout, which a slow
# process start under make -j check could pass).
# The strangers are world/test/world_stranger.py.
set -u
# shellcheck source=world/test/world_lib.sh
source "$DLJOB_SRCDIR/world/test/world_lib.sh"
STRANGER=(python3 "$DLJOB_SRCDIR/world/test/world_stranger.py")
SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
[ ${#SECRET} = 64 ] || fail "cannot make a secret"

# rank R N PORT OUT [ADDR] [world_check options]: start honest rank R of N
# in the background (pid in $!), output in OUT.R.
rank() {
	local r=$1 n=$2 port=$3 out=$4 addr=${5:-127.0.0.1}
	shift 5
	"${CLEAN_ENV[@]}" RANK="$r" WORLD_SIZE="$n" MASTER_ADDR="$addr" MASTER_PORT="$port" \
		DLJOB_JOB_SECRET="$SECRET" "$WC" --timeout 60 --steps 1 "$@" >"$out.$r" 2>&1 &
	BG_PIDS+=($!)
}

# stranger OUT ARGS...: start a stranger in the background (pid in $!).
stranger() {
	local out=$1
	shift
	"${STRANGER[@]}" "$@" >"$out.stranger" 2>&1 &
	BG_PIDS+=($!)
}

# wait_all SECONDS PID...: wait for the pids, failing if any runs longer;
# sets RCS to their exit statuses.
wait_all() {
	local lim=$1 p t0=$SECONDS
	shift
	RCS=()
	for p in "$@"; do
		while kill -0 "$p" 2>/dev/null; do
			[ $((SECONDS - t0)) -le "$lim" ] || fail "pid $p still runs after $lim s"
			sleep 0.1
		done
		wait "$p"
		RCS+=($?)
	done
}

all() { cat "$1".* 2>/dev/null; }

# wait_conn PID PORT [OUT]: wait (up to 30 s) until process PID holds an
# established TCP connection to port PORT, or (a stranger that rank 0
# answers at once) has said how it went in file OUT.  The cases start a
# peer before another on purpose; a fixed sleep for that raced a slow
# process start on a loaded machine (the later peer came first, and the
# case tested nothing or failed).
wait_conn() {
	local i
	for i in $(seq 1 300); do
		ss -Htnp state established "( dport = :$2 )" 2>/dev/null | grep -q "pid=$1," && return 0
		[ -n "${3-}" ] && [ -s "$3" ] && return 0
		kill -0 "$1" 2>/dev/null || fail "pid $1 ended before it connected to port $2"
		sleep 0.1
	done
	fail "pid $1 did not connect to port $2 within 30 s"
}

# wait_said FILE TEXT: wait (up to 30 s) until FILE holds TEXT.
wait_said() {
	local i
	for i in $(seq 1 300); do
		grep -qF "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "no '$2' in $1 within 30 s: $(cat "$1" 2>&1)"
}

ok_ranks() { # OUT N: every rank passed with exact sums
	local r
	for r in $(seq 0 $(($2 - 1))); do
		grep -q "^world_check: rank $r OK" "$1.$r" || fail "rank $r did not pass: $(all "$1")"
	done
}

# 1. An impostor claims rank 1 before the real one: it is dropped, and the
# job trains on its own gradients only.
case_impostor() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/impostor port=$(free_port)
	rank 0 3 "$port" "$o" ""; p0=$!
	stranger "$o" hello 127.0.0.1 "$port" --rank 1 --size 3; ps=$!
	wait_conn "$ps" "$port" "$o.stranger"
	sleep 0.5
	rank 1 3 "$port" "$o" ""; p1=$!
	rank 2 3 "$port" "$o" ""; p2=$!
	wait_all 40 $p0 $p1 $p2
	ok_ranks "$o" 3
	grep -q "dropped by rank 0" "$o.stranger" || fail "impostor not dropped: $(all "$o")"
	kill "$ps" 2>/dev/null
	echo "impostor as rank 1: dropped, the job's sums are exact"
}

# 2. A rogue rank 0 holds MASTER_PORT first: the real rank 0 takes the
# next port, the others refuse the rogue (it cannot prove the secret) and
# find rank 0 there; the sums are exact.
case_rogue0() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/rogue port=$(free_port)
	stranger "$o" rogue0 "$port"; ps=$!
	wait_listen "$port"
	t0=$SECONDS
	rank 0 3 "$port" "$o" ""; p0=$!
	rank 1 3 "$port" "$o" ""; p1=$!
	rank 2 3 "$port" "$o" ""; p2=$!
	wait_all 30 $p0 $p1 $p2
	ok_ranks "$o" 3
	grep -q "MASTER_PORT=$port is in use, so the rendezvous is on port $((port + 1))" "$o.0" ||
		fail "rank 0 did not say it moved to the next port: $(all "$o")"
	grep -q "sent a forged proof" "$o.stranger" || fail "no rank met the rogue: $(all "$o")"
	kill "$ps" 2>/dev/null
	echo "rogue rank 0 on MASTER_PORT: passed over by every rank, job done in $((SECONDS - t0)) s"
}

# 2b. A stranger holds MASTER_PORT (derived ports are predictable) and
# passes every connection on to the next port, where rank 0 went, byte for
# byte: a rank's handshake must not pass through it, or the stranger sits
# in the middle of that rank's connection (the table, the exchanges: where
# the ring connects, NCCL's id).  The ranks pass over it and find rank 0.
case_relay() {
	local o port p0 p1 p2 ps
	o=$WTMP/relay port=$(free_port_range 2)
	stranger "$o" relay "$port" --to $((port + 1)); ps=$!
	wait_listen "$port"
	rank 0 3 "$port" "$o" ""; p0=$!
	rank 1 3 "$port" "$o" ""; p1=$!
	rank 2 3 "$port" "$o" ""; p2=$!
	wait_all 36 $p0 $p1 $p2
	ok_ranks "$o" 3
	grep -q "a rank came" "$o.stranger" || fail "no rank went through the relay: $(all "$o")"
	! grep -q "relayed a table" "$o.stranger" ||
		fail "a stranger relaying MASTER_PORT to rank 0's port got in the middle: $(all "$o")"
	kill "$ps" 2>/dev/null
	echo "a relay on MASTER_PORT: passed over by every rank"
}

# 3. Strangers connect to the ring listeners (before the ring is built, as
# rank 2 comes late): one stays silent, the others claim every rank and
# stream floats.  All are dropped, the ring is built at once, sums exact.
case_ring() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/ring port=$(free_port)
	rank 0 3 "$port" "$o" ""; p0=$!
	rank 1 3 "$port" "$o" ""; p1=$!
	wait_conn "$p1" "$port"
	stranger "$o" ringhijack --pids "$p0,$p1" --skip "$port" --size 3 --seconds 10; ps=$!
	wait_said "$o.stranger" "connected 3 times"
	sleep 0.5
	rank 2 3 "$port" "$o" ""; p2=$!
	wait_all 20 $p0 $p1 $p2
	ok_ranks "$o" 3
	grep -q "connected 3 times" "$o.stranger" || fail "the stranger found no ring listener: $(all "$o")"
	kill "$ps" 2>/dev/null
	echo "strangers on the ring listeners: dropped, the sums are exact"
}

# 3b. A stranger floods the ring listeners with silent connections (many
# more than a listener keeps in its handshake) while the ring is built.
# The honest predecessor's connection must not be the one pushed out, and
# a rank pushed out anyway connects again: the sums are exact.
case_ringflood() {
	local o port p0 p1 p2 ps
	o=$WTMP/ringflood port=$(free_port)
	rank 0 3 "$port" "$o" ""; p0=$!
	rank 1 3 "$port" "$o" ""; p1=$!
	wait_conn "$p1" "$port"
	stranger "$o" ringflood --pids "$p0,$p1" --skip "$port" --seconds 30; ps=$!
	wait_said "$o.stranger" "flooding port"
	sleep 1
	rank 2 3 "$port" "$o" ""; p2=$!
	wait_all 36 $p0 $p1 $p2
	ok_ranks "$o" 3
	grep -q "flooding port" "$o.stranger" || fail "the stranger found no ring listener: $(all "$o")"
	kill "$ps" 2>/dev/null
	echo "a flood of strangers on the ring listeners: the ring is built, the sums are exact"
}

# 4. Idle and partial connections to MASTER_PORT before the ranks arrive
# (40 of them: sequential 5 s reads would take 200 s).
case_idle() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/idle port=$(free_port)
	rank 0 3 "$port" "$o" ""; p0=$!
	stranger "$o" idle 127.0.0.1 "$port" --count 20; ps1=$!
	"${STRANGER[@]}" idle 127.0.0.1 "$port" --count 20 --partial >"$o.partial" 2>&1 &
	ps2=$!
	BG_PIDS+=($ps2)
	wait_said "$o.stranger" "holding 20 idle connections"
	wait_said "$o.partial" "holding 20 partial connections"
	t0=$SECONDS
	rank 1 3 "$port" "$o" ""; p1=$!
	rank 2 3 "$port" "$o" ""; p2=$!
	wait_all 30 $p0 $p1 $p2
	ok_ranks "$o" 3
	kill "$ps1" "$ps2" 2>/dev/null
	echo "40 idle and partial connections: the job ran in $((SECONDS - t0)) s"
}

# 5. A member of the job (it has the secret) joins as rank 7 of 3: every
# rank stops at once naming it, also rank 2 that starts a second later.
case_range() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/range port=$(free_port)
	rank 0 3 "$port" "$o" ""; p0=$!
	stranger "$o" hello 127.0.0.1 "$port" --rank 7 --size 3 --secret "$SECRET"; ps=$!
	wait_conn "$ps" "$port" "$o.stranger"
	sleep 0.5
	rank 1 3 "$port" "$o" ""; p1=$!
	sleep 1
	rank 2 3 "$port" "$o" ""; p2=$!
	t0=$SECONDS
	wait_all 30 $p0 $p1 $p2
	for r in 0 1 2; do
		grep -q "joined as rank 7, which is out of range" "$o.$r" ||
			fail "rank $r did not name the out-of-range rank: $(all "$o")"
	done
	kill "$ps" 2>/dev/null
	echo "a member joining as rank 7 of 3: all stopped, naming it"
}

# 6. Rank 2 dies after the table, before the ring: named in seconds.
case_death() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/death port=$(free_port)
	rank 0 3 "$port" "$o" ""; p0=$!
	rank 1 3 "$port" "$o" ""; p1=$!
	stranger "$o" hello 127.0.0.1 "$port" --rank 2 --size 3 --secret "$SECRET" --after-table exit
	ps=$!
	t0=$SECONDS
	wait_all 30 $p0 $p1
	for r in 0 1; do
		grep -q "rank 2 (stranger) died" "$o.$r" || fail "rank $r did not name rank 2's death: $(all "$o")"
	done
	echo "rank 2 died between table and ring: named in $((SECONDS - t0)) s"
}

# 7. Another program holds MASTER_PORT (silent, or speaking another
# protocol): rank 0 takes the next port, rank 1 passes the program over
# (within the handshake's 5 s when it is silent) and the job runs.  When
# all 16 candidate ports are held, rank 0 says so at once and rank 1, at its
# timeout, names what holds MASTER_PORT.
case_busy() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	for talk in "" --talk; do
		o=$WTMP/busy$talk port=$(free_port)
		# shellcheck disable=SC2086 # $talk: no word or one
		stranger "$o" busy "$port" $talk; ps=$!
		wait_listen "$port"
		t0=$SECONDS
		rank 0 2 "$port" "$o" ""; p0=$!
		rank 1 2 "$port" "$o" ""; p1=$!
		wait_all 30 $p0 $p1
		ok_ranks "$o" 2
		grep -q "MASTER_PORT=$port is in use" "$o.0" || fail "rank 0 did not name the busy port: $(all "$o")"
		kill "$ps" 2>/dev/null
		echo "MASTER_PORT held by another program${talk:+ (talking)}: passed over, job done in $((SECONDS - t0)) s"
	done
	o=$WTMP/allbusy port=$(free_port_range 16)
	stranger "$o" busy "$port" --talk --count 16; ps=$!
	wait_listen $((port + 15))
	t0=$SECONDS
	for r in 0 1; do
		"${CLEAN_ENV[@]}" RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
			DLJOB_JOB_SECRET="$SECRET" "$WC" --timeout 3 --steps 1 >"$o.$r" 2>&1 &
		BG_PIDS+=($!)
		eval "q$r=$!"
	done
	# shellcheck disable=SC2154 # q0, q1 set by eval
	wait_all 30 "$q0" "$q1"
	[ "${RCS[*]}" = "1 1" ] || fail "all ports busy: exit statuses ${RCS[*]}: $(all "$o")"
	grep -q "MASTER_PORT=$port and the next 15 ports are all in use" "$o.0" ||
		fail "rank 0 did not say every candidate port is in use: $(all "$o")"
	grep -q "rank 1 found no rank 0 of this job at 127.0.0.1 (127.0.0.1) ports $port-$((port + 15)) before the timeout (port $port: the program listening there is not a dljob rank 0 (it sent \"SSH-2.0-OpenSSH_" "$o.1" ||
		fail "rank 1 did not name the program on MASTER_PORT: $(all "$o")"
	kill "$ps" 2>/dev/null
	echo "all 16 candidate ports held: both ranks named it in $((SECONDS - t0)) s"
	# A stranger on MASTER_PORT greets like a rank 0, then never sends its
	# proof, and no rank 0 comes: rank 1 stops at its 1 s timeout, not
	# after the 5 s a handshake may take (that wait ran past the timeout).
	o=$WTMP/greet port=$(free_port)
	stranger "$o" busy "$port" --greet; ps=$!
	wait_listen "$port"
	t0=$(date +%s%N)
	"${CLEAN_ENV[@]}" RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		DLJOB_JOB_SECRET="$SECRET" "$WC" --timeout 1 --steps 1 >"$o.1" 2>&1 &
	q1=$!
	BG_PIDS+=($q1)
	wait_all 30 "$q1"
	n=$((($(date +%s%N) - t0) / 1000000))
	[ "${RCS[*]}" = 1 ] || fail "a greeting stranger: exit status ${RCS[*]}: $(all "$o")"
	[ "$n" -lt 4500 ] || fail "a greeting stranger on MASTER_PORT kept rank 1 for $n ms (timeout 1 s): $(all "$o")"
	grep -q "rank 1 found no rank 0 of this job" "$o.1" || fail "rank 1 did not say it found no rank 0: $(all "$o")"
	kill "$ps" 2>/dev/null
	echo "a stranger that greets and stays silent on MASTER_PORT: rank 1 stopped in $n ms (timeout 1 s)"
}

# 7a. Rank 0 took the next port because MASTER_PORT was held when it
# started; the holder is gone when rank 1 comes, so MASTER_PORT refuses:
# rank 1 still finds rank 0 (the other ports are swept every ~1.5 s).
case_moved() {
	local o port p0 p1 ps t0
	o=$WTMP/moved port=$(free_port_range 16)
	stranger "$o" busy "$port"; ps=$!
	wait_listen "$port"
	rank 0 2 "$port" "$o" ""; p0=$!
	wait_listen $((port + 1))
	kill "$ps"
	wait "$ps" 2>/dev/null
	t0=$SECONDS
	rank 1 2 "$port" "$o" ""; p1=$!
	wait_all 30 $p0 $p1
	ok_ranks "$o" 2
	echo "MASTER_PORT freed after rank 0 moved on: rank 1 found it in $((SECONDS - t0)) s"
}

# 7b. Two steps of one job (same secret) and a job with another secret, all
# three with the same MASTER_PORT on one host, start together: each finds
# its own rank 0 (the first step's on MASTER_PORT, the others on the next
# ports), the sums are exact.
case_collide() {
	local o port r s pids=() t0
	o=$WTMP/collide port=$(free_port_range 16)
	OTHER=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
	# step rank: start rank R of step S (secret of step 2: another job's).
	step_rank() {
		local sec=$SECRET
		[ "$1" = 2 ] && sec=$OTHER
		"${CLEAN_ENV[@]}" RANK="$2" WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
			SLURM_JOB_ID=77 SLURM_STEP_ID="$1" DLJOB_JOB_SECRET="$sec" \
			"$WC" --timeout 60 --steps 1 >"$o$1.$2" 2>&1 &
		BG_PIDS+=($!)
		pids+=($!)
	}
	t0=$SECONDS
	step_rank 0 0
	wait_listen "$port"
	for r in 0 1 2; do step_rank 1 "$r"; done
	for r in 0 1 2; do step_rank 2 "$r"; done
	sleep 0.5
	for r in 1 2; do step_rank 0 "$r"; done
	wait_all 45 "${pids[@]}"
	for s in 0 1 2; do
		ok_ranks "$o$s" 3
	done
	# Steps 1 and 2 start together and race for the next ports: one gets
	# MASTER_PORT+1, the other MASTER_PORT+2, in either order; on a loaded
	# machine the first may have finished (its port free again) before the
	# second's rank 0 starts, and then both take MASTER_PORT+1.
	local p1 p2
	p1=$(sed -n 's/.*the rendezvous is on port \([0-9]*\)$/\1/p' "$o"1.0)
	p2=$(sed -n 's/.*the rendezvous is on port \([0-9]*\)$/\1/p' "$o"2.0)
	[ -n "$p1" ] && [ -n "$p2" ] || fail "a colliding step stayed on MASTER_PORT: $(all "$o"1) $(all "$o"2)"
	local pp
	for pp in "$p1" "$p2"; do
		[ "$pp" = $((port + 1)) ] || [ "$pp" = $((port + 2)) ] ||
			fail "steps 1 and 2 not on MASTER_PORT+1 and +2 (got $p1 and $p2, MASTER_PORT=$port)"
	done
	[ "$p1" != "$p2" ] || [ "$p1" = $((port + 1)) ] ||
		fail "steps 1 and 2 both on MASTER_PORT+2 (MASTER_PORT=$port)"
	echo "three rendezvous on one MASTER_PORT: all done in $((SECONDS - t0)) s, sums exact"
}

# 8. MASTER_ADDR spelled localhost by rank 0 and 127.0.0.1 by the others:
# the same listener, the same job.
case_spelling() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/spell port=$(free_port)
	rank 0 3 "$port" "$o" localhost; p0=$!
	rank 1 3 "$port" "$o" 127.0.0.1; p1=$!
	rank 2 3 "$port" "$o" localhost; p2=$!
	wait_all 40 $p0 $p1 $p2
	ok_ranks "$o" 3
	echo "MASTER_ADDR localhost / 127.0.0.1: one job"
}

# 9. Absurd world sizes are refused by name at once.
case_size() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	for n in 2147483647 2000000; do
		o=$WTMP/size$n
		rank 0 "$n" "$(free_port)" "$o" ""; p0=$!
		wait_all 15 $p0
		[ "${RCS[0]}" = 1 ] || fail "WORLD_SIZE=$n: exit status ${RCS[0]}"
		grep -q "WORLD_SIZE='$n' is not an integer in \[1, 1048576\]" "$o.0" ||
			fail "WORLD_SIZE=$n not refused by name: $(cat "$o.0")"
	done
	echo "WORLD_SIZE 2147483647 and 2000000: refused by name"
}

# 10. SIGTERM during the rendezvous (rank 2 never comes; dljob's own
# SA_RESTART handler is installed): rank 1 ends at once, rank 0 names it.
case_sigterm() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/term port=$(free_port)
	rank 0 3 "$port" "$o" "" --stop-handler; p0=$!
	rank 1 3 "$port" "$o" "" --stop-handler; p1=$!
	wait_conn "$p1" "$port"
	sleep 0.5
	t0=$SECONDS
	kill -TERM $p1
	wait_all 30 $p0 $p1
	grep -q "stopped by signal 15" "$o.1" || fail "rank 1 did not say it was stopped: $(all "$o")"
	grep -q "rank 1 (.*) gave up: .*stopped by signal 15" "$o.0" ||
		fail "rank 0 did not name rank 1's SIGTERM: $(all "$o")"
	echo "SIGTERM during the rendezvous: ended in $((SECONDS - t0)) s, named on rank 0"
}

# 11. A member trickles one byte every 1.5 s into the ring, timeout 2 s:
# the others time out (per step, not per byte) and name it.
case_trickle() {
	local o port p0 p1 ps t0
	o=$WTMP/trickle port=$(free_port)
	t0=$SECONDS
	"${CLEAN_ENV[@]}" RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		DLJOB_JOB_SECRET="$SECRET" "$WC" --timeout 2 --steps 1 >"$o.0" 2>&1 &
	p0=$!
	BG_PIDS+=($p0)
	"${CLEAN_ENV[@]}" RANK=1 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		DLJOB_JOB_SECRET="$SECRET" "$WC" --timeout 2 --steps 1 >"$o.1" 2>&1 &
	p1=$!
	BG_PIDS+=($p1)
	stranger "$o" member 127.0.0.1 "$port" --secret "$SECRET" --trickle 1.5; ps=$!
	wait_all 30 $p0 $p1
	grep -q "trickling" "$o.stranger" || fail "the member never reached the allreduce: $(all "$o")"
	for r in 0 1; do
		grep -q "rank $r: .*rank 2 (.*) did not answer for 2 s" "$o.$r" ||
			fail "rank $r did not name the trickling rank 2: $(all "$o")"
	done
	kill "$ps" 2>/dev/null
	echo "a rank trickling one byte per 1.5 s (timeout 2 s): named in $((SECONDS - t0)) s"
}

# Without a secret: the same job works, with a one-line warning.
case_nosecret() {
	local o port p0 p1 p2 ps ps1 ps2 t0 n r talk q0 q1
	o=$WTMP/nosecret port=$(free_port)
	for r in 0 1; do
		"${CLEAN_ENV[@]}" RANK="$r" WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
			"$WC" --timeout 60 --steps 1 >"$o.$r" 2>&1 &
		BG_PIDS+=($!)
		eval "q$r=$!"
	done
	# shellcheck disable=SC2154 # q0, q1 set by eval
	wait_all 40 "$q0" "$q1"
	ok_ranks "$o" 2
	[ "$(grep -c "DLJOB_JOB_SECRET is unset" "$o.0")" = 1 ] || fail "no single warning: $(cat "$o.0")"
}

# HOSTILE_CASES="impostor ring": run only those (to try one case on another
# build); default: all.
for c in ${HOSTILE_CASES:-impostor rogue0 relay ring ringflood idle range death busy moved collide spelling size sigterm trickle nosecret}; do
	"case_$c"
done
echo "PASS: hostile peers are dropped or named, honest ranks finish exactly"
exit 0
