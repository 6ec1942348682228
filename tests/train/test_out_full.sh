#!/bin/bash
# A full disk and a read-only one under --out, at each writer of a training
# run: the run stops with exit status 1 and one line naming the file and the
# cause (metrics.png, drawn last, is only reported: exit 0), nothing it
# wrote before is lost or left half-written, and once there is room again
# --resume continues from the last checkpoint and `dljob report` reads the
# whole log.
#  A  the disk fills mid-epoch: metrics.jsonl or the event file fails; the
#     log still ends with a whole line (the part of the failed one is cut)
#  B  a log a killed writer left with a torn last line: a resumed run cuts it
#     before it appends (or its first record would break the file)
#  C  the second checkpoint does not fit: the first is kept as
#     checkpoint.prev.safetensors, no temporary file is left
#  D  the exported model.safetensors does not fit: the checkpoint stays,
#     --resume of the finished run writes the weights
#  E  metrics.png does not fit: exit 0, the cause said; no half-written
#     picture, and the one drawn before still there and whole
#  G  two ranks: rank 0's failed write stops rank 1 at once, with its reason
#  F  --out read-only: refused at once naming the file, nothing changed
# Each case has its own tmpfs (size= decides what fits), in a private mount
# namespace: nothing of it is seen outside the test.  Linux refuses to
# remount a file system read-only while a file on it is open for writing
# (the run's logs are), so F makes it read-only between runs; mid-run it
# would only be the kernel's own doing after an I/O error.
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN" "build dljob first"
[ "$(id -u)" -eq 0 ] || { echo "FAIL - needs root (mount -t tmpfs in unshare -m)"; exit 1; }
if [ -z "${DLJOB_OUT_FULL_NS:-}" ]; then
	exec env DLJOB_OUT_FULL_NS=1 unshare -m --propagation private bash "$0" "$@"
fi
bin=$DLJOB_BIN
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-outfull.XXXXXX") || exit 1
pid=
pids=()
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; umount "$work/m" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
mkdir m

# 10 steps an epoch (a checkpoint each), ~2 MiB checkpoints, ~1 MiB weights.
args=(--model resnet20 --backend cpu --data synthetic:1,16,16,4,160 --batch 16 --lr 0.1 --seed 3
      --threads 1 --loader-threads 1 --print-every 1 --out m/run)
# fresh SIZE: a new tmpfs of SIZE on m with an empty m/run
fresh() {
	umount m 2>/dev/null
	mount -t tmpfs -o "size=$1,mode=0755" tmpfs m && mkdir m/run
}
grow() { mount -o remount,size=64m m; }
lines() { cat m/run/metrics.jsonl 2>/dev/null | wc -l; }
ends_whole() { [ ! -s "$1" ] || [ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ]; }
no_tmp() { ! ls m/run | grep -q '\.tmp\.'; }
# resumes LOG: the run resumed and finished
resumes() { grep -q "resumed from" "$1" && grep -q "dljob: done after" "$1"; }
report_ok() { "$bin" report m/run >report.out 2>&1; }

# ---- A: full mid-epoch
fresh 8m || { fail "mount tmpfs"; finish; }
"$bin" "${args[@]}" --epochs 50 2>a.log &
pid=$!
t=0
while [ "$(lines)" -lt 25 ] && kill -0 $pid 2>/dev/null && [ $t -lt 2400 ]; do sleep 0.05; t=$((t + 1)); done
dd if=/dev/zero of=m/fill bs=64k 2>/dev/null
wait $pid
rc=$?
pid=
msg=$(grep "^dljob: rank 0:" a.log)
check "A: exit status 1 when the disk fills mid-run (got $rc)" [ $rc -eq 1 ]
check "A: one line naming the file and the cause: $msg" \
	grep -Eq "^dljob: rank 0: (writing|cannot write) m/run/(metrics\.jsonl|events\.out\.tfevents\.[^ ]*|checkpoint\.safetensors): No space left on device" a.log
check "A: metrics.jsonl ends with a whole line" ends_whole m/run/metrics.jsonl
check "A: no temporary file left" no_tmp
rm m/fill
"$bin" "${args[@]}" --epochs 50 --steps 60 --resume 2>a2.log
check "A: --resume continues once there is room" resumes a2.log
check "A: dljob report reads the whole log" report_ok
check "A: and so does the plot" [ -s m/run/metrics.png ]
grep -q "plotting the run" a2.log && fail "A: plot: $(grep 'plotting the run' a2.log)"

# ---- B: a torn last line left by a killed writer
printf '{"step":61,"epoch":7,"loss":0.3' >>m/run/metrics.jsonl
"$bin" "${args[@]}" --epochs 50 --steps 65 --resume 2>b.log
check "B: --resume after a torn line" resumes b.log
check "B: dljob report reads the log the resumed run appended to" report_ok
grep -q 'step":61,"epoch":7,"loss":0.3{' m/run/metrics.jsonl && fail "B: the torn line runs into the next record"
check "B: no plotting error" bash -c "! grep 'plotting the run' b.log"

# ---- C: the second checkpoint does not fit
fresh 3400k
"$bin" "${args[@]}" --epochs 3 2>c.log
rc=$?
msg=$(grep "^dljob: rank 0:" c.log)
check "C: exit status 1 when a checkpoint does not fit (got $rc)" [ $rc -eq 1 ]
check "C: the message names the checkpoint, the cause and what is kept: $msg" \
	grep -q "cannot write m/run/checkpoint.safetensors: No space left on device.*kept as m/run/checkpoint.prev.safetensors" c.log
check "C: no temporary file left" no_tmp
check "C: the first checkpoint is kept" [ -s m/run/checkpoint.prev.safetensors ]
grow
"$bin" "${args[@]}" --epochs 3 --resume 2>c2.log
check "C: --resume takes it (step 10) once there is room" grep -q "resumed from m/run/checkpoint.prev.safetensors at step 10" c2.log
check "C: and finishes" resumes c2.log

# ---- D: the final weights do not fit
fresh 2800k
"$bin" "${args[@]}" --epochs 1 2>d.log
rc=$?
msg=$(grep "^dljob: rank 0:" d.log)
check "D: exit status 1 when model.safetensors does not fit (got $rc)" [ $rc -eq 1 ]
check "D: the message names model.safetensors and the cause: $msg" \
	grep -q "cannot write m/run/model.safetensors: No space left on device" d.log
check "D: no temporary file left, no model.safetensors" bash -c '! ls m/run | grep -q "\.tmp\.\|^model"'
check "D: the checkpoint is there" [ -s m/run/checkpoint.safetensors ]
grow
"$bin" "${args[@]}" --epochs 1 --resume 2>d2.log
check "D: --resume of the finished run writes the weights" [ -s m/run/model.safetensors ]

# ---- E: metrics.png does not fit: exit 0 and the cause said; E1 with no
# picture before (none is left half-written), E2 with one (it stays whole)
cp m/run/metrics.png png.before
# fill_but N: fill m but for the weights' pages and N more (tmpfs counts 4 KiB pages)
wpages=$((($(stat -c %s m/run/model.safetensors) + 4095) / 4096))
fill_but() {
	rm -f m/fill
	dd if=/dev/zero of=m/fill bs=4k count=$(($(df --output=avail -k m | tail -n 1) / 4 - wpages - $1)) 2>/dev/null
}
for e in E1 E2; do
	rm m/run/model.safetensors
	[ $e = E1 ] && rm m/run/metrics.png
	fill_but 2 # the new event file's page and one: not the picture's fifteen
	"$bin" "${args[@]}" --epochs 1 --resume 2>$e.log
	rc=$?
	check "$e: exit status 0 when only metrics.png fails (got $rc)" [ $rc -eq 0 ]
	check "$e: the weights were written" [ -s m/run/model.safetensors ]
	check "$e: the message names metrics.png and the cause: $(grep plotting $e.log)" \
		grep -q "plotting the run: writing m/run/metrics.png.tmp.[0-9]*: No space left on device" $e.log
	check "$e: no temporary file left" no_tmp
	if [ $e = E1 ]; then
		check "E1: no half-written metrics.png" [ ! -e m/run/metrics.png ]
		rm m/fill && cp png.before m/run/metrics.png
	else
		check "E2: the picture drawn before is still whole" cmp -s png.before m/run/metrics.png
	fi
done
rm -f m/fill

# ---- G: two ranks (TCP rendezvous): rank 0's failed write stops rank 1 too, with its reason
fresh 8m
port=$(${TORCH_PYTHON:-/usr/bin/python3} -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for r in 0 1; do
	env -u SLURM_JOB_ID -u SLURM_PROCID -u PMIX_RANK DLJOB_WORLD=tcp RANK=$r WORLD_SIZE=2 \
		MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" DLJOB_JOB_SECRET="$(printf '%064x' 7)" \
		"$bin" "${args[@]}" --epochs 50 --timeout 60 2>g$r.log &
	pids+=($!)
done
t=0
while [ "$(lines)" -lt 25 ] && kill -0 "${pids[0]}" 2>/dev/null && [ $t -lt 2400 ]; do sleep 0.05; t=$((t + 1)); done
check "G: two ranks train (25 steps logged)" [ "$(lines)" -ge 25 ]
dd if=/dev/zero of=m/fill bs=64k 2>/dev/null
wait "${pids[0]}"
rc0=$?
wait "${pids[1]}"
rc1=$?
pids=()
check "G: both ranks exit 1 (got $rc0 and $rc1)" [ $rc0 -eq 1 -a $rc1 -eq 1 ]
check "G: rank 1 says rank 0's reason: $(grep '^dljob: rank 1:' g1.log)" \
	grep -Eq "^dljob: rank 1: .*rank 0 .*(writing|cannot write) m/run/[^ ]*: No space left on device" g1.log
rm m/fill

# ---- F: read-only
cp -a m/run run.before
mount -o remount,ro m
"$bin" "${args[@]}" --epochs 2 --resume 2>f.log
rc=$?
check "F: exit status 1 on a read-only --out (got $rc)" [ $rc -eq 1 ]
check "F: one line naming the directory and the cause: $(tail -n 1 f.log)" \
	grep -q "m/run.*Read-only file system" f.log
check "F: nothing changed" diff -r run.before m/run
finish
