#!/bin/bash
# The --dl-* options in srun/sbatch/salloc --help, and every validation
# error: one clear 'dljob: ' line, a non-zero exit, and nodes left idle.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up

for cmd in srun sbatch salloc; do
	help=$($cmd --help 2>&1)
	for o in 'dl-job=MODEL|env' dl-data=DIR dl-epochs=N dl-batch=N dl-lr=X dl-out=DIR 'dl-bind=closest|none[,verbose]'; do
		grep -qF -- "--$o" <<<"$help" || fail "$cmd --help does not list --$o"
	done
	echo "ok   $cmd --help lists the --dl-* options"
done

mkdir -p "$WORK/data/ok" "$WORK/other" || fail mkdir
ln -s "$WORK/other" "$WORK/data/escape" || fail ln
D=$WORK/data/ok

expect_srun_error "--dl-job=foo: unknown model" --dl-job=foo true
expect_srun_error "--dl-job=ResNet50: unknown model" --dl-job=ResNet50 --dl-data="$D" true
expect_srun_error "--dl-epochs=0: expected a whole number" --dl-job=resnet18 --dl-data="$D" --dl-epochs=0 true
expect_srun_error "--dl-epochs=two: expected a whole number" --dl-job=resnet18 --dl-data="$D" --dl-epochs=two true
expect_srun_error "--dl-batch=12x: expected a whole number" --dl-job=resnet18 --dl-data="$D" --dl-batch=12x true
expect_srun_error "--dl-lr=-1: expected a positive number" --dl-job=resnet18 --dl-data="$D" --dl-lr=-1 true
expect_srun_error "--dl-lr=nan: expected a positive number" --dl-job=resnet18 --dl-data="$D" --dl-lr=nan true
expect_srun_error "--dl-bind=tight: unknown word 'tight'" --dl-job=env --dl-bind=tight true
expect_srun_error "--dl-data=DIR is required" --dl-job=resnet18 true
expect_srun_error "--dl-data=$WORK/missing: No such file or directory" --dl-job=resnet18 --dl-data="$WORK/missing" true
expect_srun_error "--dl-job=MODEL|env is required" --dl-epochs=3 true

# sbatch and salloc check before anything is queued.
out=$(cd "$WORK" && sbatch --wrap true --dl-job=foo 2>&1) && fail "sbatch accepted --dl-job=foo"
grep -qF "dljob: --dl-job=foo: unknown model" <<<"$out" || fail "sbatch: $out"
[ -z "$(squeue -h)" ] || fail "sbatch queued a job with a bad option: $(squeue -h)"
echo "ok   rejected: sbatch --dl-job=foo"
out=$(cd "$WORK" && salloc --dl-job=env --dl-batch=0 true 2>&1) && fail "salloc accepted --dl-batch=0"
grep -qF "dljob: --dl-batch=0" <<<"$out" || fail "salloc: $out"
echo "ok   rejected: salloc --dl-batch=0"

# data_allow: the resolved path must be inside; a symlink out is refused.
cluster_plugstack "data_allow=$WORK/data:/nonexistent"
expect_srun_error "--dl-data=$WORK/other: $WORK/other is outside the allowed data directories" \
	--dl-job=resnet18 --dl-data="$WORK/other" true
expect_srun_error "--dl-data=$WORK/data/escape: $WORK/other is outside" --dl-job=resnet18 --dl-data="$WORK/data/escape" true
(cd "$WORK" && srun -N1 -n1 --dl-job=env --dl-data="$D" true) || fail "--dl-data inside data_allow refused"
echo "ok   data_allow accepts $D"
# default_data stands in for a missing --dl-data (and is checked the same way).
cluster_plugstack "default_data=$WORK/other data_allow=$WORK/data"
expect_srun_error "--dl-data=$WORK/other: $WORK/other is outside" --dl-job=resnet18 true

# Bad plugstack.conf arguments: the error names the argument; jobs that do
# not use dljob still run.
for args in "bogus=1|unknown argument 'bogus'" "nic=far|nic=far: expected closest or none" \
	"master_port_range=9-3|master_port_range=9-3: expected LO-HI" "runtime=dljob|runtime=dljob is not an absolute path" \
	"topology|argument 'topology' is not key=value"; do
	cluster_plugstack "${args%%|*}"
	expect_srun_error "plugstack.conf: ${args#*|}" --dl-job=env true
	out=$(cd "$WORK" && srun -N1 -n1 echo plain 2>&1) || fail "plain srun failed with plugstack '${args%%|*}': $out"
	[ "$out" = plain ] || fail "plain srun printed more than its output with plugstack '${args%%|*}': $out"
done
echo "ok   bad plugstack arguments only affect --dl-* jobs"

# The same checks run again in slurmstepd (options can reach it through the
# environment without srun seeing them): every task fails with the message,
# srun exits non-zero, the node stays up.
cluster_plugstack ""
out=$(cd "$WORK" && _SLURM_SPANK_OPTION_dljob_dl_job=bogus srun -N1 -n1 true 2>&1) &&
	fail "slurmstepd accepted --dl-job=bogus from the environment: $out"
grep -qF "dljob: --dl-job=bogus: unknown model" <<<"$out" || fail "no dljob error for the step: $out"
grep -qF "dljob: --dl-job=bogus: unknown model" "$CLUSTER_DIR"/log/slurmd.n1.log ||
	fail "slurmstepd did not log the dljob error"
echo "ok   slurmstepd rejects --dl-job=bogus, srun exits non-zero"

nodes_idle
echo "ok   nodes idle"
