#!/bin/bash
# End to end: srun --dl-job=resnet20 with the real dljob runtime trains on
# two nodes (ranks from the plugin, TCP rendezvous on MASTER_ADDR/PORT) and
# writes its weights and metrics into --dl-out; dljob eval of those weights
# under srun -N2 -n2 --mpi=pmix gives the counts of one process.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
[ -x "${DLJOB_BIN:-}" ] || fail "DLJOB_BIN=${DLJOB_BIN:-} is not built"
spank_cluster_up
cd "$WORK" || fail "cd $WORK"

# A tiny ImageFolder dataset: 2 classes x 4 PNGs of 32x32 per split.
"${TORCH_PYTHON:-/usr/bin/python3}" "$DLJOB_SRCDIR/tests/tiny_imagefolder.py" data/tiny 4 10 ||
	fail "cannot write the tiny dataset"

cluster_plugstack "runtime=$DLJOB_BIN data_allow=$WORK/data"
out=$(timeout 110 srun -N2 -n2 --dl-job=resnet20 --dl-data=data/tiny --dl-epochs=1 --dl-batch=2 --dl-lr=0.1 \
	--dl-out=run "$DLJOB_BIN" 2>&1) || fail "training through the plugin failed: $out"
grep -q "resnet20, .* 2 ranks x batch 2" <<<"$out" || fail "the runtime did not see 2 ranks x batch 2: $out"
grep -q "done after 2 steps" <<<"$out" || fail "training did not finish: $out"
[ -s run/model.safetensors ] || fail "no run/model.safetensors: $(ls -l run 2>&1)"
grep -q '"top1"' run/metrics.jsonl || fail "no eval record in run/metrics.jsonl: $(cat run/metrics.jsonl)"
! grep -q "DLJOB_JOB_SECRET is unset" <<<"$out" || fail "the rendezvous ran unauthenticated: $out"
echo "ok   srun -N2 -n2 --dl-job=resnet20 trained with $DLJOB_BIN: $(grep -c . run/metrics.jsonl) metric records"
# srun --export=NONE (the default of many sites) passes no environment of
# the user's; the step's secret still reaches every rank (srun's launch
# request), so the rendezvous is authenticated: no warning.
out=$(timeout 110 srun -N2 -n2 --export=NONE --dl-job=resnet20 --dl-data=data/tiny --dl-epochs=1 --dl-batch=2 \
	--dl-out=run-none "$DLJOB_BIN" 2>&1) || fail "training under srun --export=NONE failed: $out"
grep -q "done after 2 steps" <<<"$out" || fail "training under --export=NONE did not finish: $out"
! grep -q "DLJOB_JOB_SECRET is unset" <<<"$out" || fail "under srun --export=NONE the rendezvous ran unauthenticated: $out"
echo "ok   srun --export=NONE --dl-job=resnet20: trained, its rendezvous authenticated by the step's secret"

# dljob eval (issue 16) under srun like training: 2 ranks on 2 nodes over
# PMIx, each evaluating its share, the counts summed; the same as one process.
ev=(eval --model resnet20 --weights run/model.safetensors --data data/tiny --backend cpu --batch 2 --json -)
one=$("$DLJOB_BIN" "${ev[@]}" 2>eval1.err) || fail "dljob eval, one process: $one $(cat eval1.err)"
two=$(timeout 110 srun -N2 -n2 --mpi=pmix "$DLJOB_BIN" "${ev[@]}" 2>eval2.err) ||
	fail "srun dljob eval failed: $two $(cat eval2.err)"
"${TORCH_PYTHON:-/usr/bin/python3}" - "$one" "$two" <<'PY' || fail "srun -N2 -n2 dljob eval differs from one process: $two"
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a["ranks"] == 1 and b["ranks"] == 2, (a["ranks"], b["ranks"])
assert a["samples"] == b["samples"] == 8 and a["confusion"] == b["confusion"], (a, b)
assert abs(a["loss"] - b["loss"]) < 1e-5, (a["loss"], b["loss"])
PY
echo "ok   srun -N2 -n2 --mpi=pmix dljob eval: the counts of one process, summed over 2 ranks"
# Two steps of one job at once, both with the default --dl-out
# (./dljob-<jobid>): the second stops before writing, naming the directory,
# and the first's metrics are its own.  The second starts once the first
# has written its first record (it is then training, 30 steps to go: the
# second step's start, slower on a loaded machine, must come well before
# the first ends, or it would find the directory free and run).
cat >two.sbatch <<EOS
#!/bin/bash
srun --overlap -n2 --dl-job=resnet20 --dl-data=data/tiny --dl-epochs=16 --dl-batch=2 "$DLJOB_BIN" >a.log 2>&1 &
a=\$!
for i in \$(seq 1000); do [ -s dljob-\$SLURM_JOB_ID/metrics.jsonl ] && break; sleep 0.1; done
srun --overlap -n2 --dl-job=resnet20 --dl-data=data/tiny --dl-epochs=1 --dl-batch=2 "$DLJOB_BIN" >b.log 2>&1
echo "b=\$?" >rc.txt
wait \$a
echo "a=\$?" >>rc.txt
EOS
jid=$(timeout 150 sbatch --parsable --wait -N2 -n2 -o two.out two.sbatch) || fail "sbatch two.sbatch: $(cat two.out rc.txt a.log b.log 2>&1)"
[ "$(cat rc.txt)" = "b=1
a=0" ] || fail "two steps in one --dl-out: exit codes $(cat rc.txt); a: $(cat a.log); b: $(cat b.log)"
grep -q "^dljob: rank 0: --dl-out $WORK/dljob-$jid: another dljob run is writing into this directory" b.log &&
	grep -q "rank 0 (n1) gave up: --dl-out $WORK/dljob-$jid: another dljob run" b.log || fail "the second step's message: $(cat b.log)"
grep -q "done after 32 steps" a.log && [ "$(grep -c '"top1"' "dljob-$jid/metrics.jsonl")" -eq 16 ] ||
	fail "the first step's run: $(cat a.log); $(cat "dljob-$jid/metrics.jsonl")"
echo "ok   two steps of one job in one --dl-out: the second stops at once naming it, the first's metrics are its own"
nodes_idle
