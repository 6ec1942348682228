# shellcheck shell=bash
# Helpers of tests/bench/bench_launch.sh, sourced; test_bench_smoke.sh checks
# them without a cluster.  A run that fails, or prints no line to time,
# stops the benchmark with a message naming the run and its log (copied out
# of the benchmark's temporary directory, which goes at exit) instead of
# leaving "nan" or an empty cell in the tables.

now() { date +%s.%N; }

# Each line of stdin with " wall=<now>" added when it arrives: the time
# dljob's rank 0 printed it (world_check and the torch script stamp their
# own lines).
stamp_lines() {
	local line
	while IFS= read -r line; do
		printf '%s wall=%s\n' "$line" "$(now)"
	done
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else printf "%.2f", a[int((NR + 1) / 2)]}'; }

# bench_fail WHAT LOG WHY: say that run WHAT failed (WHY), keep its LOG as
# ${BENCH_LOG_DIR:-${TMPDIR:-/tmp}}/bench_launch-failed.<pid>.log, show its
# last lines, and stop (status 1; the EXIT trap stops the cluster).
bench_fail() {
	local what=$1 log=$2 why=$3 keep
	keep=${BENCH_LOG_DIR:-${TMPDIR:-/tmp}}/bench_launch-failed.$$.log
	if ! cp "$log" "$keep" 2>/dev/null; then
		keep="$log (could not be copied; it goes with the benchmark's temporary directory)"
	fi
	{
		echo "bench_launch.sh: $what failed: $why; its log: $keep"
		tail -n 15 "$log" 2>/dev/null | sed 's/^/  | /'
	} >&2
	exit 1
}

# record KEY WHAT LOG PATTERN T0 [RC]: append to R[KEY] the seconds from T0
# to the latest "wall=" stamp among LOG's lines matching PATTERN (the last
# stamp of a line; the latest over the ranks); stop with
# bench_fail when the run exited RC != 0 or no line matches (its first step
# never came).  Call it directly, not in $(...): its exit must end the script.
record() {
	local key=$1 what=$2 log=$3 pat=$4 t0=$5 rc=${6:-0} t
	[ "$rc" = 0 ] || bench_fail "$what" "$log" "exit status $rc"
	t=$(grep -e "$pat" "$log" 2>/dev/null | sed -n 's/.* wall=\([0-9.]*\).*/\1/p' | sort -n | tail -1)
	[ -n "$t" ] || bench_fail "$what" "$log" "no line matching '$pat' in its output"
	R["$key"]+="$(echo "$t - $t0" | bc -l) "
}
