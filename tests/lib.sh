#!/bin/bash
# Helpers shared by dljob's shell tests.  Source it; it sets -u and gives:
#   ok MSG / fail MSG    count a check (fail does not exit: finish() does)
#   finish               exit 1 if any check failed, else 0
#   need_file F          fail the test loudly if F is missing
#   with_cluster         start the private Slurm cluster, stop it on exit
#   in_workdir NAME      a private directory $work as the working directory;
#                        on exit, kill the processes in pids[] and remove it
set -u
_checks=0
_failed=0
ok()   { _checks=$((_checks + 1)); echo "ok   - $*"; }
fail() { _checks=$((_checks + 1)); _failed=$((_failed + 1)); echo "FAIL - $*"; }
# check DESC CMD...: run CMD, ok if it succeeds.
check() { local d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; fi; }
finish() {
	echo "# $_checks checks, $_failed failed"
	[ "$_checks" -gt 0 ] || { echo "FAIL - no checks ran"; exit 1; }
	[ "$_failed" -eq 0 ]
	exit $?
}
need_file() {
	[ -e "$1" ] || { echo "FAIL - missing $1${2:+ ($2)}"; exit 1; }
}
: "${DLJOB_SRCDIR:?run under make check (DLJOB_SRCDIR unset)}"
: "${DLJOB_BUILDDIR:?run under make check (DLJOB_BUILDDIR unset)}"

with_cluster() {
	# shellcheck source=cluster/cluster.sh
	source "$DLJOB_SRCDIR/tests/cluster/cluster.sh"
	cluster_start || { echo "FAIL - private Slurm cluster did not start"; exit 1; }
	trap cluster_stop EXIT
}

in_workdir() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-$1.XXXXXX") || exit 1
	pids=()
	trap _workdir_cleanup EXIT
	cd "$work" || exit 1
}
# shellcheck disable=SC2317  # called by the EXIT trap
_workdir_cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$work"
}
