#!/bin/bash
# An admin's mistake in the plugstack arguments fails every step that asks
# for dljob with the key named, never silently (before: a topology= that
# did not load ran the tasks unbound with a warning, and an empty
# data_allow= allowed every directory); a step without --dl-* runs exactly
# as without the plugin; no node is drained (sinfo: idle), by srun steps
# nor by batch jobs (a batch step's failure is the one Slurm holds against
# the node), on Debian's 22.05 and under make check-slurm-current.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
T=$DLJOB_SRCDIR/mapping/test/topologies
mkdir -p data dir.xml || fail mkdir
printf '<?xml version="1.0"?>\n<topology version="2.0">\n  <object type="Machine" cpuset="0x1"' >cut.xml || fail "cut.xml"
probe='echo "rank=${RANK-unset} cpus=${DLJOB_CPUS-unset} hca=${NCCL_IB_HCA-unset} secret=${DLJOB_JOB_SECRET:+set} affinity=$(sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status)"'

# What a step without --dl-* gets with a correct plugstack: the reference.
cluster_plugstack "topology=$T/no-nic.xml"
# (no_wait_lines: the previous job may still be completing on n1.)
ref=$(set -o pipefail; srun -w n1 -n1 bash -c "$probe" 2>&1 | no_wait_lines) || fail "srun without --dl-*: $ref"
[[ "$ref" == "rank=unset cpus=unset hca=unset secret= affinity="* ]] || fail "a step without --dl-* was touched: $ref"

# untouched ARGS: a step without --dl-* runs as the reference.
untouched() {
	local out
	out=$(set -o pipefail; srun -w n1 -n1 bash -c "$probe" 2>&1 | no_wait_lines) ||
		fail "plugstack '$1': srun without --dl-* failed: $out"
	[ "$out" = "$ref" ] || fail "plugstack '$1': a step without --dl-* got '$out', expected '$ref'"
}

# fails_step ARGS WANT [SRUN OPTIONS]: a dljob step fails with WANT, on
# srun's stderr, non-zero; a plain step still runs; nodes stay idle.
fails_step() {
	local args=$1 want=$2 out
	shift 2
	cluster_plugstack "$args"
	out=$(srun -w n1 -n1 --dl-job=env "$@" true 2>&1) && fail "plugstack '$args': srun --dl-job=env $* succeeded: $out"
	grep -qF -- "dljob: $want" <<<"$out" || fail "plugstack '$args': expected 'dljob: $want' in: $out"
	untouched "$args"
	nodes_idle
	echo "ok   plugstack '$args' fails the dljob step ($want); a plain step runs untouched"
}

fails_step "topology=$WORK/missing.xml" "plugstack.conf: topology=: $WORK/missing.xml: No such file or directory"
# Whatever the step's binding: the site's file is wrong either way.
fails_step "topology=$WORK/missing.xml" "plugstack.conf: topology=: $WORK/missing.xml: No such file or directory" --dl-bind=none
fails_step "topology=$WORK/dir.xml" "plugstack.conf: topology=: $WORK/dir.xml: not a regular file"
fails_step "topology=$WORK/cut.xml" "plugstack.conf: topology=: $WORK/cut.xml: not a valid hwloc XML topology"
# Files that kill hwloc 2.9's own XML import (mapping/test/topologies/bad):
# read in a child first, so slurmstepd lives and the step fails by name.
fails_step "topology=$T/bad/no-complete-cpuset.xml" "plugstack.conf: topology=: $T/bad/no-complete-cpuset.xml: not a valid hwloc XML topology"
fails_step "topology=$T/bad/cut-attribute.xml" "plugstack.conf: topology=: $T/bad/cut-attribute.xml: not a valid hwloc XML topology"
# runtime=: not absolute (refused for every dljob step), missing, or a
# runtime that crashes (SIGSEGV) once Slurm runs it.
fails_step "runtime=bin/dljob" "plugstack.conf: runtime=bin/dljob is not an absolute path"
printf '#!/bin/sh\nkill -SEGV $$\n' >crash || fail crash
chmod 755 crash || fail "chmod crash"
model="--dl-job=resnet20 --dl-data=$WORK/data --dl-out=$WORK/out"
# fails_model ARGS WANT CMD: a model step running CMD (srun, and srun
# inside a batch job) fails with WANT on its stderr; the nodes stay idle.
fails_model() {
	local args=$1 want=$2 cmd=$3 out
	cluster_plugstack "$args"
	# shellcheck disable=SC2086
	out=$(srun -w n1 -n1 $model "$cmd" 2>&1) && fail "plugstack '$args': srun $model $cmd succeeded: $out"
	grep -qF -- "$want" <<<"$out" || fail "plugstack '$args': expected '$want' in: $out"
	nodes_idle
	rm -f batch.out
	# shellcheck disable=SC2086
	sbatch --wait -w n1 -n1 -o batch.out $model --wrap "srun $cmd; echo \"srun exit \$?\"" >/dev/null ||
		fail "plugstack '$args': sbatch --wait: $(cat batch.out 2>&1)"
	grep -qF -- "$want" batch.out || fail "plugstack '$args': the batch job's srun: expected '$want' in: $(cat batch.out)"
	grep -qE '^srun exit [1-9]' batch.out || fail "plugstack '$args': the batch job's srun did not fail: $(cat batch.out)"
	nodes_idle
	echo "ok   plugstack '$args' fails a model step, by srun and in a batch job ($want); nodes idle"
}
fails_model "runtime=$WORK/missing" "dljob: cannot run the runtime $WORK/missing: No such file or directory" dljob
# (The command is the runtime's own file: the step runs it on every release.)
fails_model "runtime=$WORK/crash" "Segmentation fault" "$WORK/crash"
fails_model "topology=$T/bad/no-complete-cpuset.xml" \
	"dljob: plugstack.conf: topology=: $T/bad/no-complete-cpuset.xml: not a valid hwloc XML topology" dljob
fails_step "data_allow=" "plugstack.conf: data_allow= is empty"
fails_step "data_allow=$WORK/data:" "plugstack.conf: data_allow=$WORK/data:: every entry must be an absolute directory"

# A good topology= still works (and a bad one did not stay behind).
cluster_plugstack "topology=$T/no-nic.xml"
out=$(set -o pipefail; srun -w n1 -n1 --dl-job=env bash -c "$probe" 2>&1 | no_wait_lines) || fail "srun with a good topology=: $out"
[[ "$out" == "rank=0 cpus="[0-9]* ]] || fail "good topology=: $out"
echo "ok   a good topology= binds again: $out"
