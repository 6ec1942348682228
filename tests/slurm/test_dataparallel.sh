#!/bin/bash
# Data-parallel training is right, not just running:
#  1. srun -N2 -n4 --mpi=pmix --dl-job=resnet20 on real Fashion-MNIST (Debian's
#     dataset-fashion-mnist) reaches the accuracy band of one process (>= 85 %
#     top-1 after one epoch).
#  2. After K steps, 2 ranks x batch B give the same weights as 1 rank x batch
#     2B, on the BN-free check model (with BN, batch statistics are per rank
#     and the two runs legitimately differ).  The loader hands rank r the
#     positions r, r+w, ... of each epoch's permutation, so at every step the
#     union of the ranks' batches is the single process's batch; the LR is
#     scaled by the same global batch.  Checked for PMIx+MPI and TCP ring.
. "$DLJOB_SRCDIR/tests/lib.sh"
FMNIST=/usr/share/datasets/fashion-mnist
need_file "$FMNIST/train-images-idx3-ubyte.gz" "Debian package dataset-fashion-mnist"
need_file "$DLJOB_BIN" "build dljob first"
need_file "$DLJOB_SPANK" "build dljob.so first"
export DLJOB_PLUGSTACK_ARGS="runtime=$DLJOB_BIN"
with_cluster
work=$(mktemp -d /tmp/dljob-dp.XXXXXX)
trap 'cluster_stop; rm -rf "$work"' EXIT
cd "$work" || exit 1
# Both "nodes" are this host: Open MPI over loopback TCP only.
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# Two processes per node share the 2 cores: one OpenMP thread each.
export OMP_NUM_THREADS=1
cluster_alloc -N2 --exclusive || { fail "no allocation"; finish; }

# --- 2: equivalence on the BN-free model (fast, so first) ---------------------
K=6
common=(--model convnet --data "fashion-mnist:$FMNIST" --steps $K --seed 7 --eval 0 --lr 0.4 --momentum 0.9)
"$DLJOB_BIN" "${common[@]}" --batch 64 --out one >one.log 2>&1
check "1 rank x batch 64, $K steps" test -s one/model.safetensors
for method in pmix tcp; do
	if [ $method = pmix ]; then
		launch=(srun -N2 -n2 --mpi=pmix)
	else
		launch=(srun -N2 -n2 --mpi=none)
	fi
	timeout 120 "${launch[@]}" "$DLJOB_BIN" "${common[@]}" --batch 32 --out "two-$method" >"two-$method.log" 2>&1
	check "2 ranks x batch 32 over $method, $K steps ($(grep -o '2 ranks x batch 32' "two-$method.log" | head -1))" \
		grep -q "2 ranks x batch 32" "two-$method.log"
	res=$("$TORCH_PYTHON" - one/model.safetensors "two-$method/model.safetensors" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype={"F32": "<f4", "I64": "<i8"}[v["dtype"]]).astype(np.float64)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
worst, name = 0.0, ""
moved = 0.0
for k in a:
    e = np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), 1e-30)
    if e > worst:
        worst, name = e, k
print(f"{worst:.3e} {name}")
PY
)
	err=${res%% *}
	check "weights after $K steps: 2x32 ($method) vs 1x64 rel err $res < 1e-4" \
		"$TORCH_PYTHON" -c "import sys; sys.exit(0 if float('$err') < 1e-4 else 1)"
done
# The check is sharp: a run that does not average (one rank alone, batch 32)
# lands far away.
"$DLJOB_BIN" "${common[@]}" --batch 32 --out alone >alone.log 2>&1
far=$("$TORCH_PYTHON" -c '
import sys; sys.argv=["x","one/model.safetensors","alone/model.safetensors"]
exec(open("/dev/stdin").read())' <<'PY'
import json, struct, numpy as np
def load(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8+n+v["data_offsets"][0]:8+n+v["data_offsets"][1]], "<f4").astype(np.float64)
            for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
print(max(np.abs(a[k] - b[k]).max() / np.abs(a[k]).max() for k in a))
PY
)
check "control: 1 rank x batch 32 differs from 1x64 (rel err $far > 1e-3)" \
	"$TORCH_PYTHON" -c "import sys; sys.exit(0 if float('$far') > 1e-3 else 1)"

# --- 1: accuracy band through the plugin, 4 ranks on 2 nodes -------------------
timeout 900 srun -N2 -n4 --mpi=pmix --dl-job=resnet20 --dl-data="$FMNIST" --dl-epochs=1 --dl-batch=64 \
	--dl-out=acc "$DLJOB_BIN" >acc.log 2>&1
rc=$?
check "srun -N2 -n4 --dl-job=resnet20 exited 0 (rc $rc)" test $rc -eq 0
check "4 ranks trained ($(grep -o '4 ranks x batch 64' acc.log | head -1))" grep -q "4 ranks x batch 64" acc.log
top1=$(sed -n 's/.*"top1":\([0-9.]*\).*/\1/p' acc/metrics.jsonl 2>/dev/null | tail -1)
check "4-rank Fashion-MNIST top-1 after 1 epoch: ${top1:-none}% >= 85%" \
	"$TORCH_PYTHON" -c "import sys; sys.exit(0 if float('${top1:-0}') >= 85 else 1)"
[ "$_failed" -eq 0 ] || tail -n 20 ./*.log "$CLUSTER_DIR"/log/*.log
finish
