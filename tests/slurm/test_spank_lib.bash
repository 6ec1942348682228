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

# A plugin failure must fail the step, never drain or down a node.
nodes_idle() {
	local t=0 s
	while :; do
		s=$(sinfo -h -N -o '%N %T' | sort -u)
		if ! grep -qv ' idle$' <<<"$s"; then
			return 0
		fi
		if grep -qiE 'drain|down|fail' <<<"$s"; then
			fail "node state after a plugin error: $(sinfo -h -N -o '%N %T %E')"
		fi
		t=$((t + 1))
		[ $t -lt 100 ] || fail "nodes not idle: $s"
		sleep 0.1
	done
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
