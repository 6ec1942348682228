#!/bin/bash
# dljob report on real runs: convnet on 4096 Fashion-MNIST images, 3 epochs,
# trained under srun on the private cluster at 1 rank (twice: repeated runs),
# 2 and 4 ranks (batch 32 per rank).  Every number dljob report gives (JSON)
# is recomputed here in Python from the runs' metrics.jsonl files, with the
# definitions of dljob(1); the Markdown and the plot are checked to be there,
# and every run has its own metrics.png and exactly one TensorBoard event
# file (rank 0's).
. "$DLJOB_SRCDIR/tests/lib.sh"
FMNIST=/usr/share/datasets/fashion-mnist
need_file "$FMNIST/train-images-idx3-ubyte.gz" "Debian package dataset-fashion-mnist"
need_file "$DLJOB_BIN" "build dljob first"
need_file "$DLJOB_SPANK" "build dljob.so first"
export DLJOB_PLUGSTACK_ARGS="runtime=$DLJOB_BIN"
py=${TORCH_PYTHON:-/usr/bin/python3}
with_cluster
work=$(mktemp -d /tmp/dljob-report-cluster.XXXXXX)
trap 'cluster_stop; rm -rf "$work"' EXIT
cd "$work" || exit 1
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMP_NUM_THREADS=1
cluster_alloc -N2 --exclusive || { fail "no allocation"; finish; }
"$py" "$DLJOB_SRCDIR/tests/fmnist_subset.py" "$FMNIST" "$work/fm" 4096 512 || { fail "fixture"; finish; }

train=(--model convnet --data "fashion-mnist:$work/fm" --epochs 3 --batch 32 --lr 0.4 --print-every 8
       --threads 1 --loader-threads 1 --seed 3)
runs=()
for spec in "1 1 r1a" "1 1 r1b" "1 2 r2" "2 4 r4"; do
	set -- $spec
	SECONDS=0
	timeout 300 srun -N"$1" -n"$2" --mpi=pmix "$DLJOB_BIN" "${train[@]}" --out "$3" >"$3.log" 2>&1
	rc=$?
	check "srun -N$1 -n$2 run $3 exits 0 (rc $rc, ${SECONDS} s)" test $rc -eq 0
	check "$3: $2 rank(s) in every record" "$py" -c "
import json, sys; sys.exit(0 if {json.loads(l)['ranks'] for l in open('$3/metrics.jsonl')} == {$2} else 1)"
	n_ev=$(ls "$3"/events.out.tfevents.* 2>/dev/null | wc -l)
	check "$3: one event file ($n_ev) and metrics.png" eval "[ $n_ev -eq 1 ] && [ -s $3/metrics.png ]"
	runs+=("$3")
done

"$DLJOB_BIN" report --target 0.3 --target 0.6 --json rep.json --plot rep.png "${runs[@]}" >rep.md 2>rep.err
check "dljob report of the 4 runs exits 0 ($(head -c 200 rep.err))" test $? -eq 0
res=$("$py" - "${runs[@]}" <<'PY' 2>&1
import json, math, statistics, sys
targets = [0.3, 0.6]

def load(d):
    recs = []
    with open(d + "/metrics.jsonl") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            r = json.loads(line)
            while recs and (recs[-1]["step"] > r["step"] or
                            (recs[-1]["step"] == r["step"] and not ("top1" in r and "top1" not in recs[-1]))):
                recs.pop()
            recs.append(r)
    return recs

def run(d):
    recs = load(d)
    train = [r["img_per_s"] for r in recs if "top1" not in r]
    ips = statistics.mean(train[1:] if len(train) >= 2 else train)
    ph = {k: sum(r[k] for r in recs) for k in ("compute_s", "exposed_comm_s", "loader_stall_s", "comm_s")}
    tot = ph["compute_s"] + ph["exposed_comm_s"] + ph["loader_stall_s"]
    ev = [r for r in recs if "top1" in r]
    tta = []
    for t in targets:
        hit = [r for r in ev if r["top1"] >= 100 * t]
        tta.append((hit[0]["wall_s"], hit[0]["step"]) if hit else (None, None))
    return dict(ranks=recs[-1]["ranks"], records=len(recs), steps=recs[-1]["step"], wall_s=recs[-1]["wall_s"],
                img_per_s=ips, per_rank=ips / recs[-1]["ranks"], ph=ph,
                shares={k: ph[k] / tot for k in ("compute_s", "exposed_comm_s", "loader_stall_s")},
                final=ev[-1]["top1"], best=max(r["top1"] for r in ev), tta=tta)

def close(a, b, what):
    ok = (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-9 * max(1, abs(b)))
    assert ok, (what, a, b)

mine = {d: run(d) for d in sys.argv[1:]}
j = json.load(open("rep.json"))
assert sorted(r["run"] for r in j["runs"]) == sorted(mine), [r["run"] for r in j["runs"]]
for r in j["runs"]:
    m = mine[r["run"]]
    for k, mk in (("ranks", "ranks"), ("records", "records"), ("steps", "steps"), ("wall_s", "wall_s"),
                  ("img_per_s", "img_per_s"), ("img_per_s_per_rank", "per_rank"), ("final_top1", "final"),
                  ("best_top1", "best")):
        close(r[k], m[mk], r["run"] + " " + k)
    for k in m["ph"]:
        close(r["phases"][k], m["ph"][k], r["run"] + " " + k)
    for k in m["shares"]:
        close(r["phases"][k[:-2] + "_share"], m["shares"][k], r["run"] + " share " + k)
    for t, (w, s) in zip(r["time_to_accuracy"], m["tta"]):
        close(t["wall_s"], w, r["run"] + " tta"); assert t["step"] == s, (t, s)
groups = {}
for d, m in mine.items():
    groups.setdefault(m["ranks"], []).append(m)
assert [g["ranks"] for g in j["groups"]] == sorted(groups) == [1, 2, 4], j["groups"]
base = groups[1]
base_ips = statistics.mean(m["img_per_s"] for m in base)
for g in j["groups"]:
    ms = groups[g["ranks"]]
    v = [m["img_per_s"] for m in ms]
    close(g["img_per_s"]["mean"], statistics.mean(v), "mean")
    close(g["img_per_s"]["min"], min(v), "min"); close(g["img_per_s"]["max"], max(v), "max")
    close(g["img_per_s"]["cv"], statistics.stdev(v) / statistics.mean(v) if len(v) > 1 else None, "cv")
    close(g["scaling_efficiency"], (statistics.mean(v) / g["ranks"]) / base_ips, "efficiency")
    close(g["throughput_speedup"], statistics.mean(v) / base_ips, "speedup")
    for i, t in enumerate(g["time_to_accuracy"]):
        mine_t = [m["tta"][i][0] for m in ms]
        base_t = [m["tta"][i][0] for m in base]
        want = (statistics.mean(base_t) / statistics.mean(mine_t)
                if None not in mine_t and None not in base_t else None)
        close(t["learning_speedup"], want, "learning speed-up %d %g" % (g["ranks"], t["target"]))
assert len(groups[1]) == 2 and j["groups"][0]["img_per_s"]["cv"] is not None
print("all numbers match; img/s %s; eff %s; top-1 %s" % (
    [round(g["img_per_s"]["mean"]) for g in j["groups"]], [round(g["scaling_efficiency"], 2) for g in j["groups"]],
    [round(mine[d]["final"], 1) for d in sys.argv[1:]]))
PY
)
check "report JSON recomputed from metrics.jsonl in Python: $res" eval '[ "${res#all numbers match}" != "$res" ]'
check "Markdown has the runs, scaling and variability tables" \
	eval 'grep -q "^## Runs" rep.md && grep -q "^## Scaling" rep.md && grep -q "^| 1 | img/s | 2 |" rep.md && grep -q "^| r4 | 4 |" rep.md'
check "rep.png written" "$py" -c "from PIL import Image; import sys; sys.exit(0 if Image.open('rep.png').size == (1600, 1000) else 1)"
[ "$_failed" -eq 0 ] || { echo "$res"; tail -n 20 ./*.log rep.err; }
finish
