#!/bin/bash
# --dl-job=MODEL: the task's command must be the site's runtime (plugstack
# runtime=): the word dljob, whatever the task's PATH finds, or that file
# by another name; Slurm runs it, and it sees exactly
#   --model M --data D [--epochs E] [--batch B] [--lr L] --out O
# (from the plugin's DLJOB_* variables) and the rank variables; its output
# and exit code reach srun.  Any other command is refused.  Up to Slurm
# 23.02 the plugin sets the task's first word to runtime=; from 23.11 on it
# prepends runtime=: either way Slurm runs exactly that file (argv0 is
# runtime=; from 23.11 the user's word dljob is skipped).
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
fake=$DLJOB_SRCDIR/tests/slurm/test_spank_fake_runtime.sh
read -r maj min < <(srun --version | sed -n 's/^slurm[^ ]* \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
[ -n "$maj" ] || fail "cannot read srun --version"
argv0=$fake
mkdir -p data/fmnist log || fail mkdir
export FAKE_RUNTIME_LOG=$WORK/log

cluster_plugstack "runtime=$fake data_allow=$WORK/data"
runtime_on_path "$fake"
srun -N2 -n2 --dl-job=resnet20 --dl-data=data/fmnist --dl-epochs=3 --dl-batch=16 --dl-lr=0.05 \
	--dl-out=run1 dljob 2>err.txt || fail "srun --dl-job=resnet20 failed: $(cat err.txt)"
for r in 0 1; do
	f=log/rank$r.0
	[ -f "$f" ] || fail "rank $r did not run the runtime"
	want="argv0=$argv0
arg1=--model
arg2=resnet20
arg3=--data
arg4=$WORK/data/fmnist
arg5=--epochs
arg6=3
arg7=--batch
arg8=16
arg9=--lr
arg10=0.05
arg11=--out
arg12=$WORK/run1
RANK=$r
LOCAL_RANK=0
WORLD_SIZE=2
LOCAL_WORLD_SIZE=1
MASTER_ADDR=n1"
	got=$(grep -E '^(argv0|arg[0-9]+|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR)=' "$f")
	[ "$got" = "$want" ] || fail "rank $r runtime argv/env:
$(diff <(echo "$want") <(echo "$got"))"
	grep -qE '^MASTER_PORT=29[5-9][0-9][0-9]$' "$f" || fail "rank $r: no MASTER_PORT in $f"
done
echo "ok   srun -N2 -n2 --dl-job=resnet20 ran the runtime with the exact argv and rank variables"

# A PATH of many KiB (module systems make them): the runtime is found in an
# entry past the first 8 KiB, on every node (a PATH past 128 KiB, which
# execve cannot pass to srun, is refused: test_spank_units).
rm -f log/*
long=
for i in $(seq 1 60); do long+="/nonexistent/$(printf '%0150d' "$i"):"; done
[ ${#long} -gt 9000 ] || fail "PATH of ${#long} bytes"
PATH="$long$WORK/bin:$PATH" "$(command -v srun)" -N2 -n2 --dl-job=resnet20 --dl-data=data/fmnist \
	--dl-out=run1 dljob 2>err.txt || fail "srun with a ${#long}-byte PATH before the runtime's: $(cat err.txt)"
[ -f log/rank0.0 ] && [ -f log/rank1.0 ] || fail "a ${#long}-byte PATH: the runtime did not run on both nodes"
echo "ok   the runtime is found in a PATH entry past 8 KiB"

# Defaults: --out $WORK/dljob-<jobid> (the working directory made absolute), only the options given; default_data.
rm -f log/*
cluster_plugstack "runtime=$fake default_data=$WORK/data/fmnist"
srun -N1 -n1 --dl-job=resnet50 dljob 2>err.txt || fail "srun --dl-job=resnet50: $(cat err.txt)"
job=$(sed -n 's/^SLURM_JOB_ID=//p' log/rank0.0)
got=$(grep -E '^arg[0-9]+=' log/rank0.0 | tr '\n' ' ')
[ -n "$job" ] && [ "$got" = "arg1=--model arg2=resnet50 arg3=--data arg4=$WORK/data/fmnist arg5=--out arg6=$WORK/dljob-$job " ] ||
	fail "default argv (job $job): $got"
echo "ok   defaults: default_data and --out $WORK/dljob-$job"

# The runtime's exit code and output reach srun.
rm -f log/*
out=$(FAKE_RUNTIME_RC_1=3 srun -N2 -n2 --dl-job=resnet18 --dl-data=data/fmnist dljob 2>&1) &&
	fail "srun exited 0 although rank 1's runtime exited 3"
grep -q "exit code 3" <<<"$out" || fail "srun did not report rank 1's exit code 3: $out"
echo "ok   the runtime's exit code 3 reaches srun"

# The user's own arguments follow the plugin's; the same options again are
# the runtime's to refuse (tests/train/test_cli.sh).
rm -f log/*
srun -N1 -n1 --dl-job=resnet18 --dl-data=data/fmnist dljob --steps 3 2>err.txt || fail "srun: $(cat err.txt)"
got=$(grep -E '^arg[0-9]+=' log/rank0.0 | tr '\n' ' ')
[[ "$got" == "arg1=--model arg2=resnet18 arg3=--data arg4=$WORK/data/fmnist arg5=--out arg6=$WORK/dljob-"*" arg7=--steps arg8=3 " ]] ||
	fail "user arguments after the plugin's: $got"
echo "ok   the user's own arguments follow the plugin's"

# Any other command than the site's runtime is refused, with one clear
# line naming both; the node stays up.
cp "$fake" dljob-copy && chmod +x dljob-copy || fail "cp"
for cmd in "true" "$DLJOB_SRCDIR/tests/slurm/test_spank_lib.bash" "$WORK/dljob-copy" "./dljob-copy"; do
	case $cmd in
	true) is="'true' is $(type -P true), found on the task's PATH=" ;;
	./*) is="'$cmd' is $cmd, not the runtime $fake" ;;
	*) is="'$cmd' is $cmd, not the runtime $fake" ;;
	esac
	out=$(srun -N1 -n1 --dl-job=resnet18 --dl-data=data/fmnist $cmd 2>&1) && fail "srun --dl-job=resnet18 $cmd succeeded: $out"
	grep -qF "dljob: --dl-job=resnet18 runs the site's runtime $fake: give the command as the word dljob (srun --dl-job=resnet18 ... dljob); the command $is" <<<"$out" ||
		fail "no clear error for the command $cmd: $out"
done
out=$(srun -N1 -n1 --dl-job=resnet18 --dl-data=data/fmnist no-such-command 2>&1) && fail "srun no-such-command succeeded: $out"
grep -qF "the command 'no-such-command' is not found on the task's PATH=$PATH" <<<"$out" ||
	grep -qF "the command 'no-such-command' is not found on the task's PATH=${PATH:0:40}" <<<"$out" ||
	fail "no clear error for a command not found: $out"
nodes_idle
echo "ok   a command other than the site's runtime is refused, naming what it is and where it was looked up"

# The word dljob means the site's runtime, whatever the task's PATH holds:
# not on it at all, or another dljob first on it.
rm -f log/* && mkdir -p other && printf '#!/bin/sh\necho impostor >%s/impostor\n' "$WORK" >other/dljob &&
	chmod +x other/dljob || fail "other/dljob"
PATH=/usr/bin:/bin "$(command -v srun)" -N1 -n1 --dl-job=resnet18 --dl-data=data/fmnist dljob 2>err.txt ||
	fail "dljob with the runtime not on the task's PATH: $(cat err.txt)"
[ -f log/rank0.0 ] || fail "the runtime did not run without being on the task's PATH"
PATH=$WORK/other:$PATH srun -N1 -n1 --dl-job=resnet18 --dl-data=data/fmnist dljob 2>err.txt ||
	fail "dljob with another dljob first on the task's PATH: $(cat err.txt)"
[ ! -e impostor ] || fail "another dljob on the task's PATH ran instead of the site's runtime"
echo "ok   the word dljob runs the site's runtime whatever the task's PATH"

# A runtime that cannot be run fails the tasks with one clear line; the node stays up.
cluster_plugstack "runtime=$WORK/no-such-runtime"
out=$(srun -N1 -n1 --dl-job=resnet18 --dl-data=data/fmnist dljob 2>&1) && fail "srun with a missing runtime succeeded"
grep -qF "dljob: cannot run the runtime $WORK/no-such-runtime: No such file or directory" <<<"$out" ||
	fail "no clear error for a missing runtime: $out"
nodes_idle
echo "ok   missing runtime: tasks fail with a clear error, nodes idle"

# The real dljob runtime, built with the plugin: it parses exactly the
# argv the plugin builds (a bad value is reported by the runtime itself,
# after the plugin's checks passed: an empty data directory).
if [ -x "${DLJOB_BIN:-}" ]; then
	cluster_plugstack "runtime=$DLJOB_BIN"
	mkdir -p data/empty
	out=$(srun -N1 -n1 --dl-job=resnet20 --dl-data=data/empty --dl-epochs=1 --dl-batch=4 --dl-lr=0.1 \
		--dl-out=real1 "$DLJOB_BIN" 2>&1) && fail "real runtime accepted an empty data directory: $out"
	grep -q "^dljob: --data $WORK/data/empty" <<<"$out" || fail "the real runtime did not report the data: $out"
	grep -qiE "unknown option|unrecognized|usage" <<<"$out" && fail "the real runtime rejected the plugin's argv: $out"
	echo "ok   real runtime $DLJOB_BIN parses the plugin's argv"
else
	fail "DLJOB_BIN=${DLJOB_BIN:-} is not built"
fi
nodes_idle
