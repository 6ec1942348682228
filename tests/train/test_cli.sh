#!/bin/bash
# dljob's command line: every bad invocation exits non-zero with one line
# naming the problem, and creates nothing (no output directory).
set -u
bin=${DLJOB_BIN:?DLJOB_BIN not set}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-cli.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0

# expect STATUS PATTERN ARGS...: run dljob ARGS --out out, check the exit
# status, that stderr is exactly one line matching PATTERN, and no out/.
expect() {
	local want=$1 pat=$2; shift 2
	"$bin" "$@" --out out >stdout 2>stderr
	local rc=$? lines
	lines=$(wc -l <stderr)
	if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -q -e "$pat" stderr || [ -e out ]; then
		echo "FAIL: dljob $* --out out: rc=$rc (want $want), $lines stderr lines, out/ $( [ -e out ] && echo exists || echo absent)"
		sed 's/^/  stderr: /' stderr
		fails=$((fails + 1))
		rm -rf out
	else
		echo "ok: dljob $* -> $rc: $(cat stderr)"
	fi
}

syn=synthetic:1,8,8,4,64
expect 2 "unknown model 'resnet99'"        --model resnet99 --data $syn
expect 2 "model is required"               --data $syn
expect 2 "\-\-epochs: 'x' is not an integer" --model resnet20 --epochs x --data $syn
expect 2 "\-\-epochs: '3x' is not an integer" --model resnet20 --epochs 3x --data $syn
expect 2 "\-\-lr: -1 is out of range"       --model resnet20 --lr -1 --data $syn
expect 2 "\-\-lr: 'abc' is not a number"    --model resnet20 --lr abc --data $syn
expect 2 "\-\-batch: 0 is out of range"     --model resnet20 --batch 0 --data $syn
expect 2 "\-\-batch: '99999999999999999999' is not an integer" --model resnet20 --batch 99999999999999999999 --data $syn
expect 2 "\-\-momentum: 1 is out of range"  --model resnet20 --momentum 1 --data $syn
expect 2 "\-\-seed: '-3'"                   --model resnet20 --seed -3 --data $syn
expect 2 "\-\-seed: ' -1' is not a non-negative integer" --model resnet20 --seed " -1" --data $syn
expect 2 "\-\-epochs: ' 3' is not an integer" --model resnet20 --epochs " 3" --data $syn
expect 2 "\-\-timeout: 1e-300 is out of range \[1, 1e+06\]" --model resnet20 --timeout 1e-300 --data $syn
expect 2 "\-\-timeout: 0.5 is out of range"  --model resnet20 --timeout 0.5 --data $syn
expect 2 "\-\-lr: '0x1p3' is not a number"   --model resnet20 --lr 0x1p3 --data $syn
expect 2 "\-\-lr: 'inf' is not a number"     --model resnet20 --lr inf --data $syn
expect 2 "\-\-epochs: 100001 is out of range \[1, 100000\]" --model resnet20 --epochs 100001 --data $syn
expect 2 "\-\-batch: 65537 is out of range \[1, 65536\]" --model resnet20 --batch 65537 --data $syn
expect 2 "\-\-lr: 1000.5 is out of range (0, 1000\]" --model resnet20 --lr 1000.5 --data $syn
expect 2 "\-\-schedule: unknown schedule 'linear'" --model resnet20 --schedule linear --data $syn
expect 2 "\-\-backend: unknown backend 'tpu'" --model resnet20 --backend tpu --data $syn
expect 2 "\-\-conv-algo: unknown algorithm 'fft'" --model resnet20 --conv-algo fft --data $syn
expect 2 "\-\-eval: 2 is out of range"      --model resnet20 --eval 2 --data $syn
expect 2 "unknown option '\-\-bogus'"       --model resnet20 --bogus --data $syn
expect 2 "unknown option '\-x'"            --model resnet20 -x --data $syn
expect 2 "unknown option '\-A' (see dljob"  -Ax --model resnet20 --data $syn
expect 2 "option '\-\-nesterov=1' takes no value" --model resnet20 --nesterov=1 --data $syn
expect 2 "unexpected argument 'extra'"      --model resnet20 extra --data $syn
expect 2 "warmup-epochs: 5 is longer than --epochs 1" --model resnet20 --epochs 1 --warmup-epochs 5 --data $syn
expect 1 "/nonexistent/fmnist"              --model resnet20 --backend ref --data fashion-mnist:/nonexistent/fmnist
expect 1 "/nonexistent/images"              --model resnet20 --backend ref --data /nonexistent/images
expect 1 "\-\-batch 128 is larger than the training split" --model resnet20 --backend ref --data $syn --batch 128
expect 1 "\-\-resume: cannot read /nonexistent.safetensors" --model resnet20 --backend ref --data $syn --resume=/nonexistent.safetensors
expect 1 "\-\-conv-algo winograd is not supported by the ref backend" --model resnet20 --backend ref --conv-algo winograd --data $syn --batch 8
# --init, --init-head, --normalize (issue 16)
expect 2 "\-\-init and \-\-resume exclude each other" --model resnet20 --data $syn --init x.safetensors --resume
expect 2 "\-\-init-head needs \-\-init"         --model resnet20 --data $syn --init-head new
expect 2 "\-\-init-head: 'old' is not load or new" --model resnet20 --data $syn --init x --init-head old
expect 1 "\-\-init: cannot read /nonexistent.safetensors" --model resnet20 --backend ref --data $syn --init /nonexistent.safetensors
for n in 0x1,0,0:1,1,1 nan,0,0:1,1,1 0,0,0:1,0,1 1,2 1,2,3:4,5,6,7 "0,0,0:1,1,1x"; do
	expect 2 "\-\-normalize: '$n' is not imagenet, none or MR,MG,MB:SR,SG,SB" --model resnet20 --data $syn --normalize "$n"
done
# A run that fails after making its output directory (unreadable data or
# resume file, a batch larger than the data, a backend that refuses an
# option) removes it and every parent it made for it, not only the last; a
# parent that was there before stays.
mkdir -p keep
for args in "--data /nonexistent/images" "--data $syn --resume=/nonexistent.safetensors" "--data $syn --batch 128" \
	"--data $syn --batch 8 --conv-algo winograd"; do
	# shellcheck disable=SC2086  # $args: several words
	"$bin" --model resnet20 --backend ref $args --out keep/made/deeper/out >stdout 2>stderr
	rc=$?
	if [ $rc -ne 1 ] || [ -e keep/made ] || [ ! -d keep ]; then
		echo "FAIL: dljob $args --out keep/made/deeper/out: rc=$rc (want 1), left: $(find keep -mindepth 1 | tr '\n' ' ')"
		sed 's/^/  stderr: /' stderr
		fails=$((fails + 1))
		rm -rf keep/made
	else
		echo "ok: dljob $args --out keep/made/deeper/out -> 1, nothing left in keep/"
	fi
done
rm -rf keep
# dljob eval: the same, without --out (it writes nothing but --json)
expect_eval() {
	local want=$1 pat=$2; shift 2
	"$bin" eval "$@" >stdout 2>stderr
	local rc=$? lines
	lines=$(wc -l <stderr)
	if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -q -e "$pat" stderr; then
		echo "FAIL: dljob eval $*: rc=$rc (want $want), $lines stderr lines"
		sed 's/^/  stderr: /' stderr
		fails=$((fails + 1))
	else
		echo "ok: dljob eval $* -> $rc: $(cat stderr)"
	fi
}
expect_eval 2 "\-\-model is required"      --weights w --data $syn
expect_eval 2 "\-\-weights is required"    --model resnet20 --data $syn
expect_eval 2 "\-\-split: 'test' is not val or train" --model resnet20 --weights w --split test
expect_eval 2 "unknown option '\-\-epochs'" --model resnet20 --weights w --epochs 3
expect_eval 2 "\-\-normalize: '1,2' is not" --model resnet20 --weights w --normalize 1,2
# --backend and --precision: one check (dl_cli_engine_opt) for training and
# eval, the same words; a value with a control character is quoted escaped.
expect_eval 2 "\-\-backend: unknown backend 'tpu' (auto, cpu, ref, cuda)" --model resnet20 --weights w --backend tpu
expect_eval 2 "\-\-precision: unknown precision 'fp8' (auto, fp32, bf16, fp16)" --model resnet20 --weights w --precision fp8
expect_eval 2 "\-\-backend: unknown backend 'cpu\\\\n '" --model resnet20 --weights w --backend "$(printf 'cpu\n ')"
expect 2 "\-\-precision: unknown precision 'fp32\\\\x1b'" --model resnet20 --precision "$(printf 'fp32\033')" --data $syn
expect_eval 1 "\-\-weights: /nonexistent.safetensors" --model resnet20 --weights /nonexistent.safetensors --data $syn --backend ref
"$bin" eval --help | grep -q "confusion matrix" || { echo "FAIL: dljob eval --help"; fails=$((fails + 1)); }
# Every backend honours a precision or refuses it by name (issue 14).
expect 1 "\-\-precision bf16 is not supported by the ref backend" --model resnet20 --backend ref --precision bf16 --data $syn --batch 8
expect 1 "\-\-precision fp16 is not supported by the cpu backend" --model resnet20 --backend cpu --precision fp16 --data $syn --batch 8
expect 2 "\-\-precision: unknown precision 'fp8' (auto, fp32, bf16, fp16)" --model resnet20 --precision fp8 --data $syn
expect 1 "\-\-resume: no checkpoint in out" --model resnet20 --backend ref --data $syn --resume

# A value missing at the very end of the command line.
"$bin" --model resnet20 --out out --epochs >stdout 2>stderr
rc=$?
if [ $rc -ne 2 ] || ! grep -q "option '--epochs' needs a value" stderr || [ -e out ]; then
	echo "FAIL: trailing --epochs: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
fi

# The pack sub-command reaches its own option parser (runtime/pack.c).
"$bin" pack >stdout 2>stderr
rc=$?
if [ $rc -ne 2 ] || ! grep -q "usage: dljob pack SRC DST" stderr; then
	echo "FAIL: dljob pack without arguments: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
fi

# dljob pack's numbers go through the shared option parsers: blanks, a
# sign, trailing garbage, overflow and out-of-range values are refused with
# exit status 2 and the message every other option gives, before SRC is
# looked at (before: ' 4', '+4' and '\t4' were taken as 4, and messages
# were the packer's own).
mkdir -p packsrc
pack_bad() {  # pack_bad EXPECTED ARG...
	local want=$1 rc
	shift
	"$bin" pack "$@" >stdout 2>stderr
	rc=$?
	if [ $rc -ne 2 ] || ! grep -qF -- "dljob pack: $want" stderr || [ -e packdst ]; then
		echo "FAIL: dljob pack $*: rc=$rc: $(cat stderr)"; fails=$((fails + 1)); rm -rf packdst
	else
		echo "ok: dljob pack $* -> $(head -1 stderr)"
	fi
}
pack_bad "--threads: ' 4' is not an integer" packsrc packdst --threads " 4"
pack_bad "--threads: '+4' is not an integer" packsrc packdst --threads +4
pack_bad "--threads: '-1' is not an integer" packsrc packdst --threads -1
pack_bad "--threads: '4x' is not an integer" packsrc packdst --threads 4x
pack_bad "--threads: 0 is out of range [1, 1024]" packsrc packdst --threads 0
pack_bad "--shard-size: '99999999999999999999' is not an integer" packsrc packdst --shard-size 99999999999999999999
pack_bad "--shard-size: 1048577 is out of range [1, 1048576]" packsrc packdst --shard-size 1048577
pack_bad "--max-side: 15 is out of range [16, 32768]" packsrc packdst --max-side 15
pack_bad "--quality: '9e1' is not an integer" packsrc packdst --quality 9e1
pack_bad "--quality: '' is not an integer" packsrc packdst --quality ""
pack_bad "option '--quality' needs a value" packsrc packdst --quality
pack_bad "unknown option '--bogus'" packsrc packdst --bogus
pack_bad "unknown option '-x'" packsrc packdst -xh
# an option that exists but takes no value, given one: not "unknown option"
pack_bad "option '--keep-png=1' takes no value" packsrc packdst --keep-png=1
"$bin" report --help=x a1 >stdout 2>stderr
rc=$?
if [ $rc -ne 2 ] || ! grep -qF "dljob report: option '--help=x' takes no value" stderr; then
	echo "FAIL: dljob report --help=x: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
else
	echo "ok: dljob report --help=x -> $(head -1 stderr)"
fi
pack_bad "more than SRC and DST given" packsrc packdst extra
"$bin" pack --help >stdout 2>&1 && grep -q -- "--quality Q .*1..100" stdout ||
	{ echo "FAIL: dljob pack --help: $(cat stdout)"; fails=$((fails + 1)); }

# --help and --version succeed and say what they should.
if ! "$bin" --help >help.txt 2>&1 || ! grep -q -- "--resume\[=PATH\]" help.txt; then
	echo "FAIL: --help"; fails=$((fails + 1))
fi
"$bin" --version | grep -q "^dljob [0-9]" || { echo "FAIL: --version"; fails=$((fails + 1)); }
# --version anywhere on the line, not only first; nothing is created.
for args in "--model resnet20 --version" "--data synthetic --version --epochs 3" "--epochs 2 --version"; do
	# shellcheck disable=SC2086
	out=$("$bin" $args --out out 2>&1)
	rc=$?
	if [ $rc -ne 0 ] || ! grep -qx "dljob [0-9.]* (built for Slurm [0-9.]*)" <<<"$out" || [ -e out ]; then
		echo "FAIL: dljob $args --out out: rc=$rc: $out"; fails=$((fails + 1)); rm -rf out
	else
		echo "ok: dljob $args -> $out"
	fi
done

# Model mode (srun --dl-job=MODEL): the plugin hands its checked values
# over in DLJOB_*; the same options on the command line are refused, the
# others are taken; the GPU the plugin chose must be well-formed.
for opt in "--model resnet32" "--data $syn" "--synthetic" "--out x" "--mod resnet32" "--out=x"; do
	# shellcheck disable=SC2086
	DLJOB_MODEL=resnet20 DLJOB_DATA=$syn DLJOB_OUT=out "$bin" $opt >stdout 2>stderr
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <stderr)" -ne 1 ] || ! grep -q "is already set by srun --dl-\*" stderr || [ -e out ]; then
		echo "FAIL: model mode with $opt: rc=$rc: $(cat stderr)"; fails=$((fails + 1)); rm -rf out
	else
		echo "ok: model mode refuses $opt: $(cat stderr)"
	fi
done
DLJOB_MODEL=resnet20 DLJOB_DATA=$syn DLJOB_OUT=out DLJOB_EPOCHS=1 DLJOB_BATCH=16 DLJOB_LR=0.1 \
	"$bin" --backend ref --steps 1 --eval 0 --threads 1 2>stderr
rc=$?
if [ $rc -ne 0 ] || [ ! -s out/model.safetensors ] || ! grep -q "resnet20.*x batch 16.*, 1 epoch, peak lr 0.00625" stderr; then
	echo "FAIL: model mode run from DLJOB_*: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
else
	echo "ok: model mode takes --model/--data/--out/--epochs/--batch/--lr from DLJOB_*"
fi
rm -rf out
# Slurm 23.11+: the plugin prepends the runtime (DLJOB_PREPENDED=1), so the
# user's word "dljob" is argv[1] and is skipped; without DLJOB_PREPENDED it
# is an unexpected argument.
DLJOB_MODEL=resnet20 DLJOB_DATA=$syn DLJOB_OUT=out DLJOB_EPOCHS=1 DLJOB_BATCH=16 DLJOB_LR=0.1 DLJOB_PREPENDED=1 \
	"$bin" dljob --backend ref --steps 1 --eval 0 --threads 1 2>stderr
rc=$?
if [ $rc -ne 0 ] || [ ! -s out/model.safetensors ]; then
	echo "FAIL: model mode with the runtime prepended: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
else
	echo "ok: model mode with the runtime prepended skips the user's word dljob"
fi
rm -rf out
DLJOB_MODEL=resnet20 DLJOB_DATA=$syn DLJOB_OUT=out "$bin" dljob --steps 1 >stdout 2>stderr
rc=$?
if [ $rc -ne 2 ] || ! grep -q "unexpected argument 'dljob'" stderr || [ -e out ]; then
	echo "FAIL: a stray word without DLJOB_PREPENDED: rc=$rc: $(cat stderr)"; fails=$((fails + 1)); rm -rf out
else
	echo "ok: without DLJOB_PREPENDED the word dljob is an unexpected argument"
fi
# The environment is untrusted input too (world/env.c): a bad value is
# refused by name before anything is created; a job id that is no number
# never names the default output directory (./dljob-/../../x was ../x).
for g in "DLJOB_GPU=x|DLJOB_GPU='x' is not a device index" "DLJOB_GPU=-1|DLJOB_GPU='-1'" \
         "DLJOB_GPU_BUSID=0000:5f:00|DLJOB_GPU_BUSID='0000:5f:00' is not a PCI bus id" \
         "SLURM_JOB_ID=/../../x|SLURM_JOB_ID='/../../x' is not an integer" \
         "SLURM_RESTART_COUNT=abc|SLURM_RESTART_COUNT='abc' is not an integer" \
         "TMPDIR=rel|TMPDIR='rel' is not an absolute path" \
         "DLJOB_COLLECTIVES=nccl|DLJOB_COLLECTIVES='nccl': expected mpi or ring"; do
	mkdir -p sub && cd sub || exit 1
	out=(--out out)
	case $g in SLURM_JOB_ID*) out=();; esac # the default --out
	env "${g%%|*}" "$bin" --model resnet20 --backend ref --data $syn --batch 8 --steps 1 --eval 0 \
		--threads 1 "${out[@]}" >stdout 2>stderr
	rc=$?
	cd .. || exit 1
	want=2
	case $g in DLJOB_COLLECTIVES*) want=1;; esac # found when joining the job
	if [ $rc -ne $want ] || ! grep -qF "${g#*|}" sub/stderr || [ "$(wc -l <sub/stderr)" -ne 1 ] || \
	   [ -n "$(ls sub | grep -v '^std')" ] || [ -e x ]; then
		echo "FAIL: ${g%%|*}: rc=$rc: $(cat sub/stderr), left: $(ls sub)"; fails=$((fails + 1))
	else
		echo "ok: ${g%%|*} refused: $(cat sub/stderr)"
	fi
	rm -rf sub x
done

# And a good command line does create the directory (the checks above
# would pass vacuously if nothing ever did).
"$bin" --model resnet20 --backend ref --data $syn --batch 16 --steps 1 --eval 0 --threads 1 --out out 2>stderr
rc=$?
if [ $rc -ne 0 ] || [ ! -s out/model.safetensors ]; then
	echo "FAIL: valid run: rc=$rc"; cat stderr; fails=$((fails + 1))
fi

# Resuming that checkpoint with another model or global batch is refused,
# with one line, and leaves the run's files alone.
cp out/metrics.jsonl metrics.before
for bad in "--model resnet32 --batch 16|holds a resnet20, not a resnet32" \
           "--model resnet20 --batch 8|1 rank x --batch 16 = global batch 16, this run is 1 rank x --batch 8 = 8: .*resume on 1 rank with --batch 16"; do
	opts=${bad%%|*} pat=${bad#*|}
	# shellcheck disable=SC2086
	"$bin" $opts --backend ref --data $syn --steps 2 --eval 0 --threads 1 --out out --resume 2>stderr
	rc=$?
	if [ $rc -ne 1 ] || [ "$(wc -l <stderr)" -ne 1 ] || ! grep -q -e "$pat" stderr || ! cmp -s out/metrics.jsonl metrics.before; then
		echo "FAIL: --resume with $opts: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
	else
		echo "ok: --resume with $opts -> $rc: $(cat stderr)"
	fi
done

# A plain directory of Fashion-MNIST IDX files (what the plugin passes for
# --dl-data=/usr/share/datasets/fashion-mnist) is read as fashion-mnist:DIR.
fm=${DLJOB_FMNIST:-/usr/share/datasets/fashion-mnist}
rm -rf out
"$bin" --model resnet20 --data "$fm" --batch 16 --steps 1 --eval 0 --threads 1 --out out 2>stderr
rc=$?
if [ $rc -ne 0 ] || [ ! -s out/model.safetensors ]; then
	echo "FAIL: --data $fm (plain directory): rc=$rc"; cat stderr; fails=$((fails + 1))
fi

# DLJOB_DATA_ID: the directory the plugin checked against data_allow; the
# runtime refuses to open another one at that path (a container mount).
id=$(stat -L -c '%d:%i' "$fm")
other=$(stat -L -c '%d:%i' "$(dirname "$fm")")
for g in "$other|not the directory that srun --dl-data named" "1:x|DLJOB_DATA_ID='1:x' is not DEV:INO" \
         "1:2:3|DLJOB_DATA_ID='1:2:3' is not DEV:INO" "$id|"; do
	rm -rf out
	DLJOB_MODEL=resnet20 DLJOB_DATA=$fm DLJOB_OUT=out DLJOB_BATCH=16 DLJOB_DATA_ID="${g%%|*}" "$bin" --steps 1 \
		--eval 0 --threads 1 >stdout 2>stderr
	rc=$?
	if [ -z "${g#*|}" ]; then
		if [ $rc -ne 0 ]; then echo "FAIL: DLJOB_DATA_ID of --data refused: $(cat stderr)"; fails=$((fails + 1))
		else echo "ok: DLJOB_DATA_ID of the --data directory accepted"; fi
	# a malformed value is a usage error (2), another directory a data one (1)
	elif [ $rc -ne $(case ${g%%|*} in *:*:*|*x*) echo 2;; *) echo 1;; esac) ] || ! grep -qF "${g#*|}" stderr ||
	     [ -e out/model.safetensors ]; then
		echo "FAIL: DLJOB_DATA_ID=${g%%|*}: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
	else
		echo "ok: DLJOB_DATA_ID=${g%%|*} refused: $(cat stderr)"
	fi
done
rm -rf out

# DLJOB_OUT_BASE (model mode, a relative or the default --dl-out): the
# output directory must really be under that directory, wherever its
# spelling leads: a relative path is from the working directory, '..' and
# symbolic links are followed; one that does not exist yet is created.  A
# refused one creates nothing, inside or outside.
rwork=$(cd "$work" && pwd -P)
mkdir -p base/in outside && ln -s "$rwork/outside" base/link && ln -s "$rwork/base/in" base/inlink &&
	ln -s "$rwork/nowhere" base/dangling || exit 1
bid=$(stat -L -c '%d:%i' base)
# out_base OUT [PATTERN]: run in base/ with DLJOB_OUT=OUT (and the variables
# in swap); accepted (the run's weights in OUT) without PATTERN, else
# refused with one line holding it.
swap=()
out_base() {
	local out=$1 pat=${2:-} rc d=base/$1
	case $out in /*) d=$out;; esac
	(cd base && env "${swap[@]}" DLJOB_MODEL=resnet20 DLJOB_DATA=$syn DLJOB_OUT=$out DLJOB_OUT_BASE="$bid:$rwork/base" \
		DLJOB_BATCH=16 "$bin" --backend ref --steps 1 --eval 0 --threads 1 >../stdout 2>../stderr)
	rc=$?
	if [ -z "$pat" ]; then
		if [ $rc -ne 0 ] || [ ! -s "$d/model.safetensors" ]; then
			echo "FAIL: DLJOB_OUT_BASE: --dl-out $out refused: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
		else
			echo "ok: DLJOB_OUT_BASE: --dl-out $out accepted"
		fi
	elif [ $rc -ne 1 ] || [ "$(wc -l <stderr)" -ne 1 ] || ! grep -qF -- "$pat" stderr ||
	     [ -n "$(ls outside)" ] || [ -e escaped ] || [ -e base/new ] || [ -e nowhere ]; then
		echo "FAIL: DLJOB_OUT_BASE: --dl-out $out: rc=$rc (want 1): $(cat stderr); outside: $(ls outside)"
		fails=$((fails + 1))
	else
		echo "ok: DLJOB_OUT_BASE: --dl-out $out refused: $(cat stderr)"
	fi
}
out_base results
out_base "$rwork/base/a/b/c"
out_base inlink/r
out_base ../escaped "dljob: --dl-out ../escaped resolves to $rwork/escaped, which is not under DLJOB_OUT_BASE's $rwork/base"
out_base "$rwork/base/../escaped" "resolves to $rwork/escaped, which is not under"
out_base link/r "dljob: --dl-out link/r resolves to $rwork/outside/r, which is not under DLJOB_OUT_BASE's"
out_base link "dljob: --dl-out link resolves to $rwork/outside, which is not under"
out_base "$rwork/base/link/r" "resolves to $rwork/outside/r, which is not under"
out_base new/../../escaped "dljob: --dl-out new/../../escaped: '..' after $rwork/base/new, which does not exist yet"
out_base dangling/r "dljob: --dl-out dangling/r: $rwork/base/dangling is a symbolic link to a path that does not exist"
out_base "$rwork/basement" "resolves to $rwork/basement, which is not under"

# Whose the output directory is (runtime/cli.c, walk_out): it must be the
# effective user's, root's too, and not writable by every user (sticky bit
# or not: checkpoint.safetensors could be put there before the run's
# first); group-writable is its owner's choice.  A DIR/dljob-JOBID that
# another user made beforehand in a shared working directory is refused
# and gets nothing written into it.
nobody=$(id -u nobody) || exit 1
me=$(id -u)
mkdir base/dljob-77 base/open base/sticky base/grp && chown nobody base/dljob-77 &&
	chmod 0777 base/open && chmod 1777 base/sticky && chmod 0775 base/grp || exit 1
out_base dljob-77 "dljob: --dl-out dljob-77: the output directory $rwork/base/dljob-77 is owned by uid $nobody, not by you (uid $me): its owner could put a checkpoint there that --resume would load; give --dl-out a directory of your own"
out_base open "dljob: --dl-out open: the output directory $rwork/base/open is writable by every user (mode 0777): anyone could put a checkpoint there that --resume would load; chmod o-w it"
out_base sticky "the output directory $rwork/base/sticky is writable by every user (mode 1777)"
out_base grp
for d in dljob-77 open sticky; do
	[ -z "$(ls -A base/$d)" ] || { echo "FAIL: a refused --dl-out $d got files: $(ls base/$d)"; fails=$((fails + 1)); }
done
# The race: between the check of the path and its making, another user who
# can write to a directory of the path swaps a component for a symbolic
# link out of DLJOB_OUT_BASE, or makes a component dljob was to create
# (tests/train/out_swap.c does it right after the check resolves
# DLJOB_OUT_BASE's directory).  Refused, nothing made outside (before, the
# directories were made through the link, and the second check came late)
# nor in the other user's directory.
shim=${DLJOB_BUILDDIR:?DLJOB_BUILDDIR not set}/tests/train/.libs/libout_swap.so
[ -f "$shim" ] || { echo "FAIL: no $shim"; exit 1; }
mkdir base/mid || exit 1
swap=(LD_PRELOAD="$shim" OUTSWAP_AFTER="$rwork/base" OUTSWAP_LINK="$rwork/base/mid:$rwork/outside")
out_base mid/new/r "dljob: --dl-out mid/new/r: $rwork/base/mid was made a symbolic link after the path was checked (not followed)"
[ -L base/mid ] || { echo "FAIL: out_swap did not swap base/mid"; fails=$((fails + 1)); }
swap=(LD_PRELOAD="$shim" OUTSWAP_AFTER="$rwork/base" OUTSWAP_DIR="$rwork/base/planted:$nobody")
out_base planted/r "dljob: --dl-out planted/r: $rwork/base/planted, which did not exist when the path was checked, was made meanwhile by uid $nobody, not by you (uid $me)"
[ -d base/planted ] && [ -z "$(ls -A base/planted)" ] ||
	{ echo "FAIL: base/planted: $(ls -la base/planted 2>&1)"; fails=$((fails + 1)); }
# Another rank of the job on a shared file system makes the same output
# directory first (dljob's mkdir says EEXIST) and removes it again when its
# own run fails, before dljob opens it: dljob makes it again and trains
# (test_netns's MASTER_ADDR=localhost case met this in CI); when it keeps
# vanishing, the run stops naming it.
swap=(LD_PRELOAD="$shim" OUTSWAP_VANISH="gone:1")
out_base shared/gone
swap=(LD_PRELOAD="$shim" OUTSWAP_VANISH="gone2:9")
out_base shared/gone2 "dljob: --dl-out shared/gone2: $rwork/base/shared/gone2 was removed after the path was checked"
swap=()

# The same rule without DLJOB_OUT_BASE (dljob train --out): another user's
# directory refused, one's own accepted; what dljob makes is never
# writable by others, whatever the umask (0755 less the umask).
mkdir theirs mine && chown nobody theirs || exit 1
"$bin" --model resnet20 --backend ref --data $syn --batch 16 --steps 1 --eval 0 --threads 1 --out theirs >stdout 2>stderr
rc=$?
if [ $rc -ne 1 ] || [ "$(wc -l <stderr)" -ne 1 ] || [ -n "$(ls -A theirs)" ] ||
   ! grep -qF "dljob: --out theirs: the output directory $rwork/theirs is owned by uid $nobody, not by you (uid $me)" stderr; then
	echo "FAIL: --out another user's directory: rc=$rc: $(cat stderr); in it: $(ls -A theirs)"; fails=$((fails + 1))
else
	echo "ok: --out another user's directory refused: $(cat stderr)"
fi
(umask 000 && exec "$bin" --model resnet20 --backend ref --data $syn --batch 16 --steps 1 --eval 0 --threads 1 \
	--out made/run >stdout 2>stderr)
rc=$?
if [ $rc -ne 0 ] || [ "$(stat -c %a made made/run)" != "$(printf '755\n755')" ]; then
	echo "FAIL: --out made/run under umask 000: rc=$rc, modes $(stat -c %a made made/run): $(cat stderr)"
	fails=$((fails + 1))
else
	echo "ok: --out made/run under umask 000: made 0755"
fi
"$bin" --model resnet20 --backend ref --data $syn --batch 16 --steps 1 --eval 0 --threads 1 --out mine >stdout 2>stderr
rc=$?
if [ $rc -ne 0 ] || [ ! -s mine/model.safetensors ]; then
	echo "FAIL: --out an existing directory of one's own: rc=$rc: $(cat stderr)"; fails=$((fails + 1))
else
	echo "ok: --out an existing directory of one's own accepted"
fi

# An output directory that cannot be made: the message quotes the path
# escaped (a control byte never reaches the terminal or the log).
esc=$(printf 'f\033')
: >"$esc"
"$bin" --model resnet20 --backend ref --data $syn --out "$esc/x" >stdout 2>stderr
rc=$?
if [ $rc -ne 1 ] || [ "$(wc -l <stderr)" -ne 1 ] || grep -q "$(printf '\033')" stderr ||
   ! grep -qF "dljob: --out f\\x1b/x: $rwork/f\\x1b/x: Not a directory" stderr; then
	echo "FAIL: --out with a control byte: rc=$rc: $(cat -v stderr)"; fails=$((fails + 1))
else
	echo "ok: --out with a control byte: $(cat stderr)"
fi
rm -f "$esc"

# One run per --out: rank 0 takes an fcntl write lock (open file
# description) on out/.dljob.lock, the kind NFS takes to the server (lockd,
# NFSv4), where a flock(2) on the directory stays on the node.  A process
# holding a classic POSIX lock on that file (another node's run, as the
# server sees it) stops the run before it writes anything.
mkdir -m 700 locked || exit 1
/usr/bin/python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)' locked/.dljob.lock >locker.out &
locker=$!
for _ in $(seq 600); do grep -q locked locker.out 2>/dev/null && break; sleep 0.1; done
"$bin" --model resnet20 --backend ref --data $syn --batch 8 --epochs 1 --out locked >stdout 2>stderr
rc=$?
kill "$locker" 2>/dev/null
wait "$locker" 2>/dev/null
if [ $rc -ne 1 ] || ! grep -q "^dljob: rank 0: --out locked: another dljob run is writing into this directory" stderr ||
   [ "$(ls -A locked)" != .dljob.lock ]; then
	echo "FAIL: --out held by another process's fcntl lock: rc=$rc, in it: $(ls -A locked | tr '\n' ' '): $(cat stderr)"
	fails=$((fails + 1))
else
	echo "ok: --out held by another process's fcntl lock on its .dljob.lock: $(cat stderr)"
fi
rm -rf locked locker.out
# The lock file stays in a directory the run did not make, also when the
# run fails after taking it (here: --init names no checkpoint, read after
# the rendezvous): only a failed run that made the directory removes it.
mkdir -m 700 kept || exit 1
echo "not a checkpoint" >notckpt
"$bin" --model resnet20 --backend ref --data $syn --batch 8 --epochs 1 --init notckpt --out kept >stdout 2>stderr
rc=$?
if [ $rc -eq 0 ] || [ ! -f kept/.dljob.lock ]; then
	echo "FAIL: a run that failed in an existing --out: rc=$rc, in it: $(ls -A kept | tr '\n' ' '): $(cat stderr)"
	fails=$((fails + 1))
else
	echo "ok: a run that failed in an existing --out leaves its .dljob.lock: $(tail -1 stderr)"
fi
rm -rf kept notckpt

# A --data directory the user cannot search: the errno is named, not
# "missing" (which says that it has no train/).  As root, the runtime runs
# as nobody (root searches anything).
mkdir -p noperm/d/train pubout && chmod 777 pubout && chmod 000 noperm/d || exit 1
as=()
if [ "$(id -u)" = 0 ]; then
	chmod 711 "$work" && as=(setpriv --reuid=nobody --regid=nogroup --clear-groups) || exit 1
fi
"${as[@]}" "$bin" --model resnet20 --data "$work/noperm/d" --out "$work/pubout/o" >stdout 2>stderr
rc=$?
if [ $rc -eq 0 ] || ! grep -qxF "dljob: --data $work/noperm/d: $work/noperm/d/train: Permission denied" stderr; then
	echo "FAIL: a --data the user cannot search: rc=$rc: $(cat stderr)"
	fails=$((fails + 1))
else
	echo "ok: a --data the user cannot search is named with its errno: $(cat stderr)"
fi
chmod 700 noperm/d && rm -rf noperm pubout

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
exit 0
