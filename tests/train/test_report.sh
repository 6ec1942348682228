#!/bin/bash
# dljob report on metrics.jsonl files written here with known numbers:
#  - per run: throughput (mean img/s of the training records after the
#    first), phase sums and shares, final top-1, time to each --target;
#  - across rank counts: scaling efficiency, throughput and learning
#    speed-up; variability (mean, min, max, CV) of the repeated 1-rank runs;
#  - a resumed run's repeated steps replace the old ones, an eval record of
#    the same step as a training record does not, a torn last line is ignored;
#  - Markdown, JSON (--json) and the plot (--plot) say the same;
#  - every malformed file is refused with FILE:LINE and what is wrong, and bad
#    options with exit status 2;
#  - a run resumed on another rank count (a real one: 2 ranks, then resumed
#    on 1, as test_resume_change.sh; and one written here with known
#    numbers): throughput per segment over that segment's own rank count,
#    the run's per-rank throughput their mean, "2->1" and a section saying
#    the run changed rank count; its group's throughput leaves it out
#    (before: every img/s was divided by the last rank count).
. "$DLJOB_SRCDIR/tests/lib.sh"
need_file "$DLJOB_BIN" "build dljob first"
py=${TORCH_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-report.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

"$py" - <<'PY'
import json, os
def rec(step, ips, stall=1.0, comp=7.0, comm=0.0, exp=0.0, wall=0.0, ranks=1, **ev):
    r = {"step": step, "epoch": 1, "loss": 1.0, "lr": 0.1, "img_per_s": ips, "loader_stall_s": stall,
         "compute_s": comp, "comm_s": comm, "exposed_comm_s": exp, "bad_samples": 0, "wall_s": wall, "ranks": ranks}
    if ev:
        r.update({"top1": ev["top1"], "top5": 90.0, "eval_loss": 1.0, "eval_samples": 100})
    return json.dumps(r, separators=(",", ":"))
def run(name, lines, tail=""):
    os.makedirs(name)
    with open(name + "/metrics.jsonl", "w") as f:
        f.write("".join(l + "\n" for l in lines) + tail)
# two 1-rank runs (a repeat) and one 4-rank run
run("a1", [rec(10, 50, wall=10), rec(20, 100, wall=20), rec(20, 100, 0, 0, wall=22, top1=40),
           rec(30, 100, wall=32), rec(40, 100, wall=42), rec(40, 100, 0, 0, wall=44, top1=70)])
run("a2", [rec(10, 50, wall=10), rec(20, 120, wall=20), rec(20, 120, 0, 0, wall=22, top1=40),
           rec(30, 120, wall=30), rec(40, 120, wall=38), rec(40, 120, 0, 0, wall=40, top1=74)])
b = lambda *a, **k: rec(*a, ranks=4, comm=0.0 if "top1" in k else 3.0, exp=0.0 if "top1" in k else 1.0, **k)
run("b4", [b(10, 90, wall=3), b(20, 360, wall=6), b(20, 360, 0, 0, wall=7, top1=35),
           b(30, 360, wall=9), b(40, 9999, wall=12),          # stale: the run was resumed from step 20
           b(30, 360, wall=9), b(40, 360, wall=10), b(40, 360, 0, 0, wall=11, top1=60)],
    tail='{"step":50,"ep')                                   # torn by a kill
PY

"$DLJOB_BIN" report --target 0.3 --target 0.5 --target 0.72 --json rep.json --plot rep.png a1 a2 b4 >rep.md 2>rep.err
check "dljob report a1 a2 b4 exits 0 ($(head -c 200 rep.err))" test $? -eq 0
res=$("$py" - <<'PY' 2>&1
import json, math
j = json.load(open("rep.json"))
def close(a, b):
    assert (a is None and b is None) or abs(a - b) <= 1e-9 * max(1, abs(b)), (a, b)
runs = {r["run"]: r for r in j["runs"]}
a1, a2, b4 = runs["a1"], runs["a2"], runs["b4"]
assert [r["run"] for r in j["runs"]] == ["a1", "a2", "b4"]
close(a1["img_per_s"], 100); close(a2["img_per_s"], 120); close(b4["img_per_s"], 360)
close(b4["img_per_s_per_rank"], 90)
assert b4["records"] == 6 and b4["steps"] == 40, b4          # stale 9999 gone, torn line ignored
assert a1["records"] == 6                                      # eval records at a training step kept
close(a1["phases"]["compute_s"], 28); close(a1["phases"]["loader_stall_s"], 4)
close(a1["phases"]["compute_share"], 28 / 32); close(a1["phases"]["loader_stall_share"], 4 / 32)
close(b4["phases"]["exposed_comm_s"], 4); close(b4["phases"]["comm_s"], 12)
close(b4["phases"]["exposed_comm_share"], 4 / 36)
close(a2["final_top1"], 74)
tta = {t["target"]: t for t in a1["time_to_accuracy"]}
close(tta[0.3]["wall_s"], 22); assert tta[0.3]["step"] == 20
close(tta[0.5]["wall_s"], 44); assert tta[0.72]["wall_s"] is None and tta[0.72]["step"] is None
g = {x["ranks"]: x for x in j["groups"]}
assert g[1]["runs"] == 2 and g[4]["runs"] == 1
s = g[1]["img_per_s"]
close(s["mean"], 110); close(s["min"], 100); close(s["max"], 120); close(s["cv"], math.sqrt(200) / 110)
assert g[4]["img_per_s"]["cv"] is None                         # one run: no CV
close(g[1]["scaling_efficiency"], 1); close(g[4]["scaling_efficiency"], 90 / 110)
close(g[4]["throughput_speedup"], 360 / 110)
ls = {t["target"]: t for t in g[4]["time_to_accuracy"]}
close(ls[0.5]["learning_speedup"], 42 / 11); close(ls[0.3]["learning_speedup"], 22 / 7)
assert ls[0.72]["learning_speedup"] is None                    # a2 reached 72 %, a1 did not
close(g[1]["time_to_accuracy"][2]["wall_s"]["mean"], 40); assert g[1]["time_to_accuracy"][2]["wall_s"]["n"] == 1
print("ok")
PY
)
check "JSON numbers are the hand-computed ones ($res)" test "$res" = ok
check "Markdown run row of b4" grep -qF '| b4 | 4 | 40 | 11.00 | 360.0 | 90.0 | 28.00 (77.8%) | 4.00 (11.1%) | 4.00 (11.1%) | 12.00 | 60.00 | 7.00 | 20 | 11.00 | 40 | not reached | - |' rep.md
check "Markdown scaling row of 4 ranks" grep -qF '| 4 | 1 | 360.0 | 90.0 | 81.8% | 3.27 | 7.00 | 3.14 | 11.00 | 3.82 | - (0/1 reached) | - |' rep.md
check "Markdown variability of the 1-rank runs" grep -qF '| 1 | img/s | 2 | 110.00 | 100.00 | 120.00 | 12.9% |' rep.md
# A diverging run logs huge losses before it stops: reported and drawn, not refused.
mkdir div && sed 's/"loss":1.0/"loss":2.4e+27/' a1/metrics.jsonl >div/metrics.jsonl
"$DLJOB_BIN" report --plot div.png div >div.md 2>div.err
check "a run with loss 2.4e27 is reported ($(head -c 100 div.err))" test -s div.png
"$DLJOB_BIN" report --target 0.3 --json - a1 a2 b4 >rep2.json 2>/dev/null
check "--json - writes the JSON alone on stdout" "$py" -c "import json; json.load(open('rep2.json'))"
res=$("$py" - rep.png <<'PY'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
assert im.size == (1600, 1000), im.size
px = list(im.getdata())
n = [sum(1 for p in px if p == c) for c in ((31, 119, 180), (255, 127, 14), (44, 160, 44))]
assert min(n) > 200, n
print("3 series drawn: %s px" % n)
PY
)
check "--plot: a PNG with the three runs ($res)" test $? -eq 0

# Malformed files: refused, naming FILE:LINE.
bad() {  # bad NAME EXPECTED CONTENT...
	local name=$1 want=$2; shift 2
	mkdir -p "$name" && printf '%s' "$@" >"$name/metrics.jsonl"
	"$DLJOB_BIN" report a1 "$name" >/dev/null 2>"$name.err"
	local rc=$?
	check "$name refused (rc $rc): $(head -c 160 "$name.err")" \
		eval "[ $rc -eq 1 ] && grep -qF -- \"$want\" \"$name.err\""
}
good=$(head -n 1 a1/metrics.jsonl)
bad e_json "e_json/metrics.jsonl:2: column" "$good"$'\n' '{"step":20,' $'\n'
bad e_noranks 'e_noranks/metrics.jsonl:1: no \"ranks\"' "${good/,\"ranks\":1/}"$'\n'
bad e_top1 'e_top1/metrics.jsonl:1: \"top1\": 150 is out of range' "${good/\}/,\"top1\":150,\"top5\":1\}}"$'\n'
bad e_dup 'e_dup/metrics.jsonl:1: column' "${good/\}/,\"step\":3\}}"$'\n'
bad e_type 'e_type/metrics.jsonl:1: \"loss\" is not a number' "${good/\"loss\":1.0/\"loss\":\"x\"}"$'\n'
bad e_big 'e_big/metrics.jsonl:1: column' "${good/\"compute_s\":7.0/\"compute_s\":1e999}"$'\n'
bad e_neg 'e_neg/metrics.jsonl:1: \"compute_s\": -7 is out of range' "${good/\"compute_s\":7.0/\"compute_s\":-7}"$'\n'
bad e_step 'e_step/metrics.jsonl:1: \"step\" is not an integer' "${good/\"step\":10/\"step\":1.5}"$'\n'
bad e_array 'e_array/metrics.jsonl:1: not a JSON object' '[1,2]'$'\n'
bad e_empty 'e_empty/metrics.jsonl: no records' ''
mkdir e_nul
printf '{"a":1\0}\n' >e_nul/metrics.jsonl
"$DLJOB_BIN" report e_nul >/dev/null 2>e_nul.err
check "a NUL byte is refused ($(cat e_nul.err))" grep -qF "e_nul/metrics.jsonl:1: NUL byte" e_nul.err
"$DLJOB_BIN" report nowhere >/dev/null 2>nowhere.err
check "a missing run directory is named ($(cat nowhere.err))" grep -qF "nowhere/metrics.jsonl: No such file" nowhere.err
"$DLJOB_BIN" report --json nodir/x.json a1 >/dev/null 2>json.err
check "an unwritable --json is named ($(cat json.err))" eval 'grep -qF "cannot write nodir/x.json: No such file" json.err'
cp -r a1 "$(printf 'bad\xffname')"
"$DLJOB_BIN" report --json x.json "$(printf 'bad\xffname')" >/dev/null 2>utf.err
check "a run name that is not UTF-8 is refused for JSON ($(cat utf.err))" grep -qF "not UTF-8" utf.err
# --- a run resumed on another rank count, numbers known: 2 ranks (warm-up 50,
# then 200 img/s: 100 per rank), resumed on 1 (warm-up 40, then 100)
"$py" - <<'PY'
import json, os
def rec(step, ips, ranks):
    return json.dumps({"step": step, "epoch": 1, "loss": 1.0, "lr": 0.1, "img_per_s": ips, "loader_stall_s": 1.0,
                       "compute_s": 7.0, "comm_s": 0.0, "exposed_comm_s": 0.0, "bad_samples": 0, "wall_s": step,
                       "ranks": ranks})
os.makedirs("r21")
with open("r21/metrics.jsonl", "w") as f:
    for l in [rec(10, 50, 2), rec(20, 200, 2), rec(30, 200, 2), rec(40, 40, 1), rec(50, 100, 1), rec(60, 100, 1)]:
        f.write(l + "\n")
PY
"$DLJOB_BIN" report --json r21.json a1 r21 >r21.md 2>r21.err
check "dljob report a1 r21 exits 0 ($(head -c 200 r21.err))" test $? -eq 0
res=$("$py" - <<'PY' 2>&1
import json
j = json.load(open("r21.json"))
r = {x["run"]: x for x in j["runs"]}["r21"]
assert r["ranks"] == 1 and r["ranks_changed"] is True, r
seg = [(s["ranks"], s["from_step"], s["to_step"], s["records"], s["img_per_s"], s["img_per_s_per_rank"]) for s in r["segments"]]
assert seg == [(2, 0, 30, 3, 200.0, 100.0), (1, 30, 60, 3, 100.0, 100.0)], seg
assert r["img_per_s_per_rank"] == 100.0, r["img_per_s_per_rank"]     # before: 128 (mixed img/s over 1 rank)
assert r["img_per_s"] == 150.0, r["img_per_s"]
a1 = {x["run"]: x for x in j["runs"]}["a1"]
assert a1["ranks_changed"] is False and len(a1["segments"]) == 1, a1
g = j["groups"][0]
assert g["ranks"] == 1 and g["runs"] == 2 and g["runs_changed_ranks"] == 1, g
assert g["img_per_s"]["n"] == 1 and g["img_per_s"]["mean"] == 100.0, g   # a1's alone
print("ok")
PY
)
check "r21: throughput per segment and per rank over each segment's ranks ($res)" test "$res" = ok
check "Markdown: r21's ranks 2->1 and per rank 100" grep -qF '| r21 | 2->1 | 60 | 60.00 | 150.0 | 100.0 |' r21.md
check "Markdown: a section on runs that changed rank count" grep -qF '## Runs that changed rank count' r21.md
check "Markdown: r21's segments" eval "grep -qF '| r21 | 1 | 2 | 1-30 | 3 | 200.0 | 100.0 |' r21.md &&
	grep -qF '| r21 | 2 | 1 | 31-60 | 3 | 100.0 | 100.0 |' r21.md"
check "Markdown: the group says it holds a run that changed" grep -qF '| 1 | 2 (1 changed rank count) | 100.0 | 100.0 |' r21.md
# a segment of one eval record at the last step there can be (another rank
# count than the training record of that step): no step past LONG_MAX
mkdir smax
printf '%s\n' '{"step":9223372036854775807,"epoch":1,"loss":1.0,"lr":0.1,"img_per_s":10,"loader_stall_s":1.0,"compute_s":7.0,"comm_s":0.0,"exposed_comm_s":0.0,"bad_samples":0,"wall_s":1,"ranks":2}' \
	'{"step":9223372036854775807,"epoch":1,"loss":1.0,"lr":0.1,"img_per_s":10,"loader_stall_s":1.0,"compute_s":7.0,"comm_s":0.0,"exposed_comm_s":0.0,"bad_samples":0,"wall_s":2,"ranks":1,"top1":5,"top5":9}' \
	>smax/metrics.jsonl
"$DLJOB_BIN" report smax >smax.md 2>smax.err
check "a segment at step LONG_MAX: its step alone ($(grep '| smax | 2 |' smax.md))" \
	grep -qF '| smax | 2 | 1 | 9223372036854775807 | 1 |' smax.md
"$DLJOB_BIN" report a1 a2 >plain.md 2>/dev/null
check "no section on changed rank counts when none changed" eval '! grep -q "changed rank count" plain.md'

# --- the same, from a real run: 2 ranks x 8 for 3 steps, resumed on 1 rank
# x 16 to step 6 (test_resume_change.sh's case; a few seconds)
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
args=(--model resnet20 --backend cpu --data synthetic:1,16,16,4,64 --epochs 2 --lr 0.2 --seed 3 --threads 1
      --loader-threads 1 --eval 0 --print-every 1 --timeout 60 --out "$work/real")
pids=()
for r in 0 1; do
	env -u SLURM_JOB_ID -u SLURM_PROCID -u PMIX_RANK -u SLURM_RESTART_COUNT DLJOB_WORLD=tcp RANK=$r WORLD_SIZE=2 \
		MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$DLJOB_BIN" "${args[@]}" --batch 8 --steps 3 2>"real$r.log" &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
check "real run on 2 ranks ($(tail -c 300 real0.log))" test $rc -eq 0
env -u SLURM_JOB_ID -u SLURM_PROCID -u SLURM_RESTART_COUNT "$DLJOB_BIN" "${args[@]}" --batch 16 --steps 6 --resume \
	2>real.log
check "... resumed on 1 rank ($(tail -c 300 real.log))" test $? -eq 0
"$DLJOB_BIN" report --json real.json "$work/real" >real.md 2>real.err
check "dljob report on it exits 0 ($(head -c 200 real.err))" test $? -eq 0
res=$("$py" - "$work/real/metrics.jsonl" <<'PY' 2>&1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert [x["ranks"] for x in recs] == [2, 2, 2, 1, 1, 1], [x["ranks"] for x in recs]
r = json.load(open("real.json"))["runs"][0]
assert r["ranks_changed"] is True and r["ranks"] == 1, r
want = []
for ranks, part in ((2, recs[:3]), (1, recs[3:])):
    ips = [x["img_per_s"] for x in part][1:]            # the first of each segment is its warm-up
    want.append((ranks, part[0]["step"] - 1, part[-1]["step"], 3, sum(ips) / len(ips)))
got = [(s["ranks"], s["from_step"], s["to_step"], s["records"], s["img_per_s"]) for s in r["segments"]]
assert len(got) == 2 and all(g[:4] == w[:4] and abs(g[4] - w[4]) <= 1e-9 * w[4] for g, w in zip(got, want)), (got, want)
for s in r["segments"]:
    assert abs(s["img_per_s_per_rank"] - s["img_per_s"] / s["ranks"]) <= 1e-9 * s["img_per_s"], s
used = recs[1:3] + recs[4:]
per_rank = sum(x["img_per_s"] / x["ranks"] for x in used) / len(used)
assert abs(r["img_per_s_per_rank"] - per_rank) <= 1e-9 * per_rank, (r["img_per_s_per_rank"], per_rank)
print("ok: %.0f img/s per rank on 2 ranks, %.0f on 1" % (got[0][4] / 2, got[1][4]))
PY
)
check "real run: each segment over its own rank count ($res)" eval '[ "${res%%:*}" = ok ]'
check "real run: Markdown says 2->1" grep -qF "| $work/real | 2->1 | 6 |" real.md

for opts in "--target 0 a1" "--target 1.5 a1" "--target x a1" "" "--bogus a1"; do
	# shellcheck disable=SC2086
	"$DLJOB_BIN" report $opts >/dev/null 2>usage.err
	rc=$?
	check "dljob report $opts: usage error (rc $rc, $(head -c 100 usage.err))" test $rc -eq 2
done
finish
