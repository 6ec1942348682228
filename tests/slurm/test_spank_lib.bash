# Shared by the tests/slurm/test_spank_*.sh cluster tests (sourced, not run).
# Starts the private cluster of tests/cluster/cluster.sh with the freshly
# built dljob.so, and stops it on exit.
set -u
: "${DLJOB_SRCDIR:?run under make check}" "${DLJOB_SPANK:?run under make check}"

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# shellcheck source=../cluster/cluster.sh
. "$DLJOB_SRCDIR/tests/cluster/cluster.sh" || fail "cannot source tests/cluster/cluster.sh"

WORK=$(mktemp -d /tmp/dljob-spank-test.XXXXXX) || fail "mktemp"
_spank_cleanup() {
	cluster_stop
	rm -rf "$WORK"
}
trap _spank_cleanup EXIT

# Model mode runs the task's command, which must be the site's runtime
# (plugstack runtime=): runtime_on_path FILE makes `dljob` on the tasks'
# PATH that file, as an installed dljob is on a real cluster.
mkdir -p "$WORK/bin" || fail "mkdir $WORK/bin"
export PATH="$WORK/bin:$PATH"
runtime_on_path() {
	ln -sfn "$1" "$WORK/bin/dljob" || fail "ln -s $1 $WORK/bin/dljob"
}

# plugstack.conf with dljob.so (arguments $1) followed by the test plugin
# tests/slurm/marker_spank.so, whose task_init sets DLJOB_TEST_MARKER.
plugstack_with_marker() {
	local so=$DLJOB_BUILDDIR/tests/slurm/.libs/marker_spank.so
	[ -f "$so" ] || fail "$so is not built"
	printf 'required %s %s\nrequired %s\n' "$DLJOB_SPANK" "$1" "$so" >"$CLUSTER_DIR/plugstack.conf.new" &&
		mv -f "$CLUSTER_DIR/plugstack.conf.new" "$CLUSTER_DIR/plugstack.conf" || fail "plugstack.conf"
}

spank_cluster_up() {
	cluster_start || fail "cannot start the test cluster (tests/cluster/cluster.sh)"
	# Steps of one test run one after another; a short timeout keeps a hung
	# step from hanging make check.
	export SLURM_TIMELIMIT=2 SBATCH_TIMELIMIT=2 SLURM_WAIT=30
}

# srun_bounded ARGS...: srun ARGS, stopped if it has not finished after
# $SRUN_BOUND seconds (default 120): then it fails (status 124) after
# printing every job of the cluster with its state and reason to stderr.
# SLURM_TIMELIMIT bounds a step once it runs, never a job that pends: Slurm
# 24.11 keeps some requests a 2-CPU node cannot place pending for
# "Resources" forever (test_spank_bind.sh), which must fail the test, with
# why, not hang make check.
srun_bounded() {
	local pid i limit=${SRUN_BOUND:-120}
	srun "$@" &
	pid=$!
	for ((i = 0; i < limit * 10; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			return
		fi
		sleep 0.1
	done
	{
		echo "srun $* did not finish in ${limit}s; the cluster's jobs:"
		squeue -h -o '%i %j %T reason=%r nodes=%N cpus=%C tres_per_node=%b'
		squeue -h -s -o 'step %i %j %T nodes=%N'
		scontrol -o show job
	} >&2
	kill "$pid" 2>/dev/null
	wait "$pid"
	return 124
}

# A plugin failure must fail the step, never drain or down a node.
nodes_idle() {
	local t=0 s
	while :; do
		s=$(sinfo -h -N -o '%N %T' | sort -u)
		# "planned": idle, kept by backfill for a job that had to wait
		# (a heterogeneous one), until its next cycle (bf_interval, 30 s).
		if ! grep -qvE ' (idle|planned)$' <<<"$s"; then
			return 0
		fi
		if grep -qiE 'drain|down|fail' <<<"$s"; then
			fail "node state after a plugin error: $(sinfo -h -N -o '%N %T %E')"
		fi
		t=$((t + 1))
		[ $t -lt 600 ] || fail "nodes not idle after 60 s: $s"
		sleep 0.1
	done
}

# no_wait_lines: stdin less the lines srun prints while its job or step
# waits for resources ("srun: job N queued and waiting for resources",
# "... has been allocated resources", "Job N step creation temporarily
# disabled, retrying", "Slurm is busy, step creation delayed", "Step
# created for ..."): srun's, not the step's.
# On a loaded machine the previous job may still be completing on the node
# when the next srun asks for it, so a test comparing a step's whole output
# (2>&1) must drop them; anything else the step or the plugin prints stays.
no_wait_lines() {
	sed -E '/^srun: (job [0-9]+ (queued and waiting for resources|has been allocated resources)|Job [0-9]+ step creation (temporarily|still) disabled, retrying.*|Slurm is busy, step creation delayed|Step created for .*)$/d'
}

# Run srun with args; it must fail and print the dljob error containing $1.
expect_srun_error() {
	local want=$1 out rc
	shift
	out=$(cd "$WORK" && srun -N1 -n1 "$@" 2>&1)
	rc=$?
	[ $rc -ne 0 ] || fail "srun $* succeeded, expected an error with '$want'"
	grep -qF -- "dljob: $want" <<<"$out" || fail "srun $*: expected 'dljob: $want' in: $out"
	echo "ok   rejected: srun $*"
}

# cpu_list "0-2,5" -> "0 1 2 5"
cpu_list() {
	local r out=
	for r in ${1//,/ }; do
		if [[ $r == *-* ]]; then out+=" $(seq "${r%-*}" "${r#*-}" | tr '\n' ' ')"; else out+=" $r"; fi
	done
	echo $out
}

# cpus_outside LIST HELD: LIST is not empty and none of its CPUs is in HELD.
cpus_outside() {
	local c h
	[ -n "$1" ] && [ "$1" != - ] || return 1
	for c in $(cpu_list "$1"); do for h in $(cpu_list "$2"); do [ "$c" != "$h" ] || return 1; done; done
}

# shared_node_check SOURCE_RE: on a node shared with another job, dljob
# plans within the step's own CPUs.  Job A holds one core of n1 (bound to
# it: held.txt); job B's step gets another, and its 2 tasks (-O: both on
# its one core) are planned, bound and exported there, never on A's core
# (before, the plan split the whole node, and task 0 was planned on A's
# core).  The table's title must say the CPUs came from SOURCE_RE (an ERE
# inside the parentheses).  Needs the live topology (cluster_plugstack
# without topology=) and $probe (test_spank_bind.sh's).  Runs in the
# current directory.
shared_node_check() {
	local src=$1 holder held rc within r row cpus bound env_cpus
	if [ "$(sinfo -h -n n1 -o %c)" -lt 2 ]; then
		echo "skip a node shared with another job: n1 has one CPU"
		return 0
	fi
	rm -f held.txt
	srun -w n1 -n1 -J dljob-holder --cpu-bind=cores bash -c \
		'sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status >held.txt; exec sleep 100' >/dev/null 2>&1 &
	holder=$!
	for _ in $(seq 600); do [ -s held.txt ] && break; sleep 0.1; done
	held=$(cat held.txt 2>/dev/null)
	[ -n "$held" ] || fail "job A (the holder) did not start: $(squeue -h -o '%i %j %T reason=%r')"
	srun_bounded -w n1 -n2 -O --dl-job=env --dl-bind=closest,verbose bash -c "$probe" >out.txt 2>err.txt
	rc=$?
	scancel -n dljob-holder
	wait "$holder" 2>/dev/null
	[ $rc = 0 ] || fail "srun beside job A: $(cat err.txt)"
	within=$(sed -nE "s/^dljob: mapping of 2 tasks on n1, .*, within CPUs ([0-9,-]+) \(.*$src.*\)$/\1/p" err.txt)
	cpus_outside "$within" "$held" ||
		fail "the plan is not within the step's CPUs from $src (job A holds $held): $(cat err.txt)"
	for r in 0 1; do
		row=$(grep "^dljob: rank=$r local_rank=$r " err.txt) || fail "no row for rank $r: $(cat err.txt)"
		cpus=$(sed 's/.* cpus=\([0-9,-]*\).* bound=.*/\1/' <<<"$row")
		bound=$(sed 's/.* bound=\([0-9,-]*\) .*/\1/' <<<"$row")
		env_cpus=$(sed -n "s/^rank=$r .* cpus=\([0-9,-]*\) .*/\1/p" out.txt)
		cpus_outside "$cpus" "$held" && cpus_outside "$bound" "$held" && cpus_outside "$env_cpus" "$held" ||
			fail "rank $r was planned or bound on job A's CPUs $held: $row / $(grep "^rank=$r " out.txt)"
		[ "$(cpu_list "$cpus")" = "$(cpu_list "$within")" ] ||
			fail "rank $r: 2 tasks on the step's one core share it: $row"
	done
	echo "ok   a node shared with another job (it holds CPUs $held): planned and bound within the step's CPUs $within ($(grep -o 'within CPUs .*' err.txt))"
}
