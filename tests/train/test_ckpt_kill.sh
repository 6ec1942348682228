#!/bin/bash
# SIGKILL at any moment, checkpoint writing included, never leaves --out
# without a checkpoint that --resume takes, and what a killed writer leaves
# (NAME.tmp.PID) neither confuses the next run nor piles up: it is removed,
# and said, before that run writes anything.
#  - a run with a checkpoint at every step (an epoch is one batch) is
#    resumed and killed again and again: at random moments, and at the
#    moment a temporary checkpoint file appears (mid-write); each resume must
#    say where it resumed from and get on with training;
#  - temporary files planted as a killed writer leaves them (garbage, of
#    another pid) are removed by the next run; a file of the user's that
#    only looks alike is kept.
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN" "build dljob first"
bin=$DLJOB_BIN
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-ckptkill.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1

# resnet56 (7 MiB checkpoints, a write long enough to be hit), 16 images a
# step: one step an epoch, so one checkpoint a step.
args=(--model resnet56 --backend cpu --data synthetic:1,8,8,4,20 --batch 16 --epochs 100000 --lr 0.1
      --threads 1 --loader-threads 1 --print-every 1 --eval 0 --out run)
"$bin" "${args[@]}" --steps 2 2>first.log || { cat first.log; fail "first run"; finish; }

# kill_at WHEN: resume, wait for its "resumed from" line (or its end), then
# SIGKILL it WHEN it is: "random" (0-0.4 s later) or "tmp" (a temporary
# checkpoint file exists)
lost=0 hit=0
kill_at() {
	rm -f run.log # not the last run's: the shell may open it after the loop below looks
	"$bin" "${args[@]}" --resume 2>run.log &
	pid=$!
	local t=0
	while ! grep -qs "resumed from" run.log && kill -0 $pid 2>/dev/null && [ $t -lt 3000 ]; do
		sleep 0.02
		t=$((t + 1))
	done
	if ! grep -qs "resumed from" run.log; then
		kill -9 $pid 2>/dev/null
		wait $pid 2>/dev/null
		echo "# resume $i failed (exit $?): $(grep -v '^step' run.log | tail -n 3)"
		pid=
		lost=$((lost + 1))
		return
	fi
	if [ "$1" = tmp ]; then
		t=0
		while ! compgen -G 'run/checkpoint.safetensors.tmp.*' >/dev/null && [ $t -lt 20000 ]; do
			t=$((t + 1))
		done
		compgen -G 'run/checkpoint.safetensors.tmp.*' >/dev/null && hit=$((hit + 1))
	else
		sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
	fi
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	pid=
}
for i in $(seq 1 16); do kill_at random; done
for i in $(seq 17 28); do kill_at tmp; done
check "28 resumes after SIGKILLs all resumed ($lost did not)" [ $lost -eq 0 ]
echo "# $hit kills landed while a temporary checkpoint file existed"
check "some kills landed mid-write ($hit)" [ $hit -gt 0 ]

# What the killed writers left, and planted ones: garbage of another pid.
head -c 100000 /dev/urandom >run/checkpoint.safetensors.tmp.999999
head -c 1000 /dev/urandom >run/model.safetensors.tmp.1
head -c 1000 /dev/urandom >run/metrics.png.tmp.2
head -c 1000 /dev/urandom >run/imagefolder-0123456789abcdef.idx.tmp.3
echo mine >run/notes.tmp.4
echo mine >run/checkpoint.safetensors.tmp.old
left=$(ls run | grep -c '\.tmp\.[0-9]*$')
left=$((left - 1)) # the index cache's is another rank's to finish: kept
ck=run/checkpoint.safetensors
[ -e $ck ] || ck=run/checkpoint.prev.safetensors
at=$(head -c 65536 $ck | grep -ao '"step":"[0-9]*"' | grep -o '[0-9][0-9]*')
"$bin" "${args[@]}" --resume --steps $((at + 3)) 2>last.log
rc=$?
check "the last resume (from step $at) runs to the end (exit $rc)" grep -q "dljob: done after $((at + 3)) steps" last.log
check "it removed the $((left - 1)) temporary files of killed writers, and said so" \
	[ "$(grep -c 'dljob: removed run/.*\.tmp\.[0-9]*, a temporary file left by a writer that was killed' last.log)" \
	  -eq $((left - 1)) ]
check "none is left" bash -c "! ls run | grep -q '\.safetensors\.tmp\.[0-9]*$\|png\.tmp\.[0-9]*$'"
check "an index cache's temporary file is kept (another rank may be writing it)" test -e run/imagefolder-0123456789abcdef.idx.tmp.3
check "the user's look-alike files are kept" test -e run/notes.tmp.4 -a -e run/checkpoint.safetensors.tmp.old
check "dljob report reads the log of all these runs" "$bin" report run
finish
