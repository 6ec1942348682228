#!/bin/bash
# Helpers for the world tests (tests/slurm/test_world_*.sh): sourced, not run.
# Environment from make check: DLJOB_SRCDIR, DLJOB_BUILDDIR.

# shellcheck disable=SC2034 # used by the scripts that source this
WC=${DLJOB_BUILDDIR:?}/world/test/world_check
WTMP=$(mktemp -d /tmp/dljob-world.XXXXXX) || exit 1
# Open MPI's shared-memory transport crashes across the two slurmd "nodes"
# of the test cluster, which share one host: TCP only, and over loopback
# (the "nodes" are 127.0.0.1; connecting to this VM's own eth0 address fails
# now and then and Open MPI then crashes).  Test-only settings.
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
# Processes started in the background, killed at exit (a hung rank sleeps
# for an hour otherwise).
BG_PIDS=()
world_cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	[ -n "${KEEP_WTMP-}" ] || rm -rf "$WTMP"
}
trap world_cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# env with every job-describing variable removed, so a test never inherits
# a world from the shell that runs make check: "${CLEAN_ENV[@]}" VAR=x cmd
# (an external command, so "... &" gives the pid of cmd itself).
CLEAN_ENV=(env)
for _v in $(compgen -e); do
	case $_v in
	SLURM_*|PMIX_*|PMI_*|OMPI_COMM_*|RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|DLJOB_WORLD|DLJOB_COLLECTIVES|DLJOB_JOB_SECRET)
		CLEAN_ENV+=(-u "$_v") ;;
	esac
done
unset _v
clean_env() { "${CLEAN_ENV[@]}" "$@"; }

# A free TCP port on this machine.
free_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 12000))
		if ! ss -Htan "( sport = :$p )" 2>/dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# The first of N consecutive free TCP ports on this machine.
free_port_range() {
	local n=$1 p i k busy
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 12000))
		busy=
		for k in $(seq 0 $((n - 1))); do
			if ss -Htan "( sport = :$((p + k)) )" 2>/dev/null | grep -q .; then
				busy=1
				break
			fi
		done
		[ -n "$busy" ] || { echo "$p"; return 0; }
	done
	return 1
}

# Wait (up to 60 s) until something listens on TCP port PORT.
wait_listen() {
	local i
	for i in $(seq 1 600); do
		ss -Hltn "( sport = :$1 )" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	fail "nothing listens on port $1"
}

# check_ok FILE N METHOD [LOCAL_SIZE]: all N ranks came up with METHOD and
# finished with every sum right.
check_ok() {
	local f=$1 n=$2 m=$3 ls=${4-} r
	for r in $(seq 0 $((n - 1))); do
		grep -q "^world_check: ready method=$m rank=$r size=$n " "$f" ||
			fail "rank $r of $n did not come up with method $m: $(cat "$f")"
		grep -q "^world_check: rank $r OK" "$f" || fail "rank $r did not pass: $(cat "$f")"
	done
	if [ -n "$ls" ]; then
		[ "$(grep -c "^world_check: ready .* local_size=$ls " "$f")" -eq "$n" ] ||
			fail "local sizes are not all $ls: $(grep ready "$f")"
	fi
	return 0
}

# check_failed FILE N DEAD: every rank but DEAD reported DEAD's death by
# name, and none passed.
check_failed() {
	local f=$1 n=$2 dead=$3 r
	grep -q "world_check: rank $dead dies" "$f" || fail "rank $dead never died: $(cat "$f")"
	for r in $(seq 0 $((n - 1))); do
		[ "$r" = "$dead" ] && continue
		grep -q "^world_check: rank $r: .*rank $dead \(([^)]*) \)\?died" "$f" ||
			fail "rank $r did not name rank $dead as dead: $(cat "$f")"
	done
	! grep -q "^world_check: rank [0-9]* OK" "$f" || fail "a rank passed after a death: $(cat "$f")"
	return 0
}

# Start the private cluster and one allocation of both nodes; sets JOB.
cluster_up() {
	local tasks=${1-4}
	# shellcheck source=/dev/null
	source "$DLJOB_SRCDIR/tests/cluster/cluster.sh" || fail "cannot source cluster.sh"
	cluster_start || fail "cannot start the test cluster"
	trap 'world_cleanup; cluster_stop' EXIT
	JOB=$(salloc -N2 -n"$tasks" --no-shell 2>&1 | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
	[ -n "$JOB" ] || fail "salloc gave no allocation"
}

# No node is drained or down.
nodes_usable() {
	local st
	st=$(sinfo -h -N -o '%N %T' | sort | tr '\n' ' ')
	case $st in *drain*|*down*|*fail*) fail "a node is not usable after the test: $st" ;; esac
	return 0
}

# Give the allocation back and wait until both nodes are idle again (never
# drained), up to 60 s.
nodes_idle() {
	scancel "$JOB" 2>/dev/null
	local st
	for _ in $(seq 1 120); do
		st=$(sinfo -h -N -o '%N %T' | sort | tr '\n' ' ')
		[ "$st" = "n1 idle n2 idle " ] && return 0
		case $st in *drain*|*down*) fail "a node is not usable after the test: $st" ;; esac
		sleep 0.5
	done
	fail "nodes not idle after 60 s: $st"
}
