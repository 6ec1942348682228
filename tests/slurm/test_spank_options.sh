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
# The runtime's own limits (common/optval.h), refused at submit time with
# the runtime's own words.
expect_srun_error "--dl-epochs: 0 is out of range [1, 100000]" --dl-job=resnet18 --dl-data="$D" --dl-epochs=0 true
expect_srun_error "--dl-epochs: 1000000 is out of range [1, 100000]" --dl-job=resnet18 --dl-data="$D" --dl-epochs=1000000 true
expect_srun_error "--dl-epochs: 'two' is not an integer" --dl-job=resnet18 --dl-data="$D" --dl-epochs=two true
expect_srun_error "--dl-epochs: ' 3' is not an integer" --dl-job=resnet18 --dl-data="$D" --dl-epochs=" 3" true
expect_srun_error "--dl-batch: '12x' is not an integer" --dl-job=resnet18 --dl-data="$D" --dl-batch=12x true
expect_srun_error "--dl-batch: 65537 is out of range [1, 65536]" --dl-job=resnet18 --dl-data="$D" --dl-batch=65537 true
expect_srun_error "--dl-lr: -1 is out of range (0, 1000]" --dl-job=resnet18 --dl-data="$D" --dl-lr=-1 true
expect_srun_error "--dl-lr: 1001 is out of range (0, 1000]" --dl-job=resnet18 --dl-data="$D" --dl-lr=1001 true
expect_srun_error "--dl-lr: 'nan' is not a number" --dl-job=resnet18 --dl-data="$D" --dl-lr=nan true
expect_srun_error "--dl-lr: '0x1p3' is not a number" --dl-job=resnet18 --dl-data="$D" --dl-lr=0x1p3 true
expect_srun_error "--dl-out: the value 'xxxxxxxxxxxxxxxx" --dl-job=env --dl-out="$(printf '%05000d' 0 | tr 0 x)" true
# The bounds themselves are accepted by srun and by the runtime.
runtime_on_path "$DLJOB_BIN"
cluster_plugstack "runtime=$DLJOB_BIN"
out=$(cd "$WORK" && srun -N1 -n1 --dl-job=resnet20 --dl-data="$D" --dl-epochs=100000 --dl-batch=65536 --dl-lr=1000 \
	dljob --version 2>&1) || fail "srun with the largest values: $out"
grep -q "^dljob [0-9]" <<<"$out" || fail "the runtime refused the largest values srun accepted: $out"
cluster_plugstack ""
echo "ok   srun and the runtime accept the same largest values"
expect_srun_error "--dl-bind=tight: unknown word 'tight'" --dl-job=env --dl-bind=tight true
expect_srun_error "--dl-data=DIR is required" --dl-job=resnet18 true
expect_srun_error "--dl-data=$WORK/missing: No such file or directory" --dl-job=resnet18 --dl-data="$WORK/missing" true
expect_srun_error "--dl-job=MODEL|env is required" --dl-epochs=3 true

# sbatch and salloc check before anything is queued.
out=$(cd "$WORK" && sbatch --wrap true --dl-job=foo 2>&1) && fail "sbatch accepted --dl-job=foo"
grep -qF "dljob: --dl-job=foo: unknown model" <<<"$out" || fail "sbatch: $out"
out=$(cd "$WORK" && sbatch --wrap true --dl-job=env --dl-epochs=100001 2>&1) && fail "sbatch accepted --dl-epochs=100001"
grep -qF "dljob: --dl-epochs: 100001 is out of range [1, 100000]" <<<"$out" || fail "sbatch: $out"
[ -z "$(squeue -h)" ] || fail "sbatch queued a job with a bad option: $(squeue -h)"
echo "ok   rejected: sbatch --dl-job=foo"
out=$(cd "$WORK" && salloc --dl-job=env --dl-batch=0 true 2>&1) && fail "salloc accepted --dl-batch=0"
grep -qF "dljob: --dl-batch: 0 is out of range" <<<"$out" || fail "salloc: $out"
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
# ... in model mode only: an env job runs the user's own program, which never
# reads it, so a default_data missing here (a site default only the GPU
# nodes mount) must not fail it.
cluster_plugstack "default_data=$WORK/missing"
out=$(set -o pipefail; cd "$WORK" && srun -N1 -n1 --dl-job=env echo env-ran 2>&1 | no_wait_lines) || fail "--dl-job=env failed on default_data: $out"
[ "$out" = env-ran ] || fail "--dl-job=env with a missing default_data printed more than its output: $out"
expect_srun_error "--dl-data=$WORK/missing: No such file or directory" --dl-job=resnet18 true
echo "ok   default_data is checked for model mode only"

# Bad plugstack.conf arguments: the error names the argument; jobs that do
# not use dljob still run.
for args in "bogus=1|unknown argument 'bogus'" "nic=far|nic=far: expected closest or none" \
	"master_port_range=9-3|master_port_range=9-3: expected LO-HI" "runtime=dljob|runtime=dljob is not an absolute path" \
	"topology|argument 'topology' is not key=value"; do
	cluster_plugstack "${args%%|*}"
	expect_srun_error "plugstack.conf: ${args#*|}" --dl-job=env true
	out=$(set -o pipefail; cd "$WORK" && srun -N1 -n1 echo plain 2>&1 | no_wait_lines) || fail "plain srun failed with plugstack '${args%%|*}': $out"
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
# (on whichever node the step ran: n1 may still be completing the previous step)
grep -qF "dljob: --dl-job=bogus: unknown model" "$CLUSTER_DIR"/log/slurmd.n[12].log ||
	fail "slurmstepd did not log the dljob error"
echo "ok   slurmstepd rejects --dl-job=bogus, srun exits non-zero"

nodes_idle
echo "ok   nodes idle"
