#!/bin/bash
# Tests that cross a real network interface (issue 15): the private cluster
# with CLUSTER_NETNS=1 (tests/cluster/cluster.sh), so n1 and n2 are separate
# network hosts (own namespace, own eth0 on a bridge, own name and
# /etc/hosts) and nothing between ranks on different nodes can go through
# loopback.  Across them:
#   1. each node resolves n1 (MASTER_ADDR) to n1's own address, not loopback;
#   2. data-parallel training over the TCP rendezvous and ring (srun -N2
#      -n2, MASTER_ADDR from the node list): after K steps the weights equal
#      one rank's with twice the batch;
#   3. --dl-job=env: PyTorch's gloo all-reduce with init_method=env://;
#   4. a rank killed mid-collective (on n2, then rank 0 on n1): every other
#      rank names it within 30 s.
# PMIx/Open MPI across the namespaces is not covered here.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
FMNIST=/usr/share/datasets/fashion-mnist
WC=${DLJOB_BUILDDIR:?}/tests/slurm/world_check
TORCH=${TORCH_PYTHON:-/usr/bin/python3}
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || fail "no $FMNIST (Debian package dataset-fashion-mnist)"
[ -x "${DLJOB_BIN:?}" ] || fail "build dljob first ($DLJOB_BIN)"
export CLUSTER_NETNS=1 DLJOB_PLUGSTACK_ARGS="runtime=$DLJOB_BIN" OMP_NUM_THREADS=1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
cluster_alloc -N2 --exclusive || fail "salloc"
sub=$CLUSTER_NETNS_SUBNET

# 1. Two hosts: their own names and addresses, n1 resolved to n1's eth0.
srun --overlap -N2 -n2 bash -c 'echo "$(hostname) $(getent hosts n1 | cut -d" " -f1) $(ip -4 -br addr show eth0 | tr -s " " | cut -d" " -f3)"' \
	| sort >hosts.out 2>&1 || fail "srun on the namespaced nodes: $(cat hosts.out)"
printf 'n1 %s11 %s11/24\nn2 %s11 %s12/24\n' "$sub" "$sub" "$sub" "$sub" | diff - hosts.out >/dev/null ||
	fail "the nodes are not separate hosts with n1 at ${sub}11: $(cat hosts.out)"
echo "ok   n1 and n2 are separate network hosts (${sub}11, ${sub}12); both resolve MASTER_ADDR=n1 to ${sub}11"

# 2. Data-parallel training across the bridge: 2 ranks x batch 32 == 1 x 64.
K=4
common=(--model convnet --data "fashion-mnist:$FMNIST" --steps "$K" --seed 7 --eval 0 --lr 0.4 --momentum 0.9)
"$DLJOB_BIN" "${common[@]}" --batch 64 --out one >one.log 2>&1 || fail "1 rank: $(tail -5 one.log)"
timeout 120 srun --overlap -N2 -n2 --mpi=none "$DLJOB_BIN" "${common[@]}" --batch 32 --out two >two.log 2>&1 ||
	fail "2 ranks across the namespaces: $(tail -20 two.log)"
grep -q "2 ranks x batch 32" two.log || fail "not 2 ranks: $(tail -20 two.log)"
err=$("$TORCH" - one/model.safetensors two/model.safetensors <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype={"F32": "<f4", "I64": "<i8"}[v["dtype"]]).astype(np.float64)
            for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys()
print(max(np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), 1e-30) for k in a))
PY
) || fail "cannot compare the weights"
"$TORCH" -c "import sys; sys.exit(0 if float('$err') < 1e-4 else 1)" ||
	fail "2x32 across the namespaces vs 1x64: rel err $err"
echo "ok   data-parallel training across the bridge: 2x32 vs 1x64 after $K steps, rel err $err"

# 3. --dl-job=env: PyTorch gloo all-reduce over env:// across the hosts.
out=$(timeout 120 srun --overlap -N2 -n2 --dl-job=env "$TORCH" -c '
import os, torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1), 10.0])
dist.all_reduce(t)
print("rank %d/%d on %s via %s:%s sum %g %g" % (dist.get_rank(), dist.get_world_size(), os.uname().nodename,
      os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], t[0].item(), t[1].item()), flush=True)
dist.destroy_process_group()
' 2>&1) || fail "gloo all-reduce across the namespaces: $out"
for r in 0 1; do
	grep -q "^rank $r/2 on n$((r + 1)) via n1:[0-9]* sum 3 20$" <<<"$out" || fail "rank $r: $out"
done
echo "ok   PyTorch gloo all-reduce (env://) across the hosts"

# 4. A rank killed mid-collective, TCP world: named everywhere in < 30 s.
for dead in 2 0; do
	start=$SECONDS
	srun --overlap -N2 -n4 --mpi=none "$WC" --timeout 20 --steps 4 --die-at-step 2 --rank $dead \
		>"dead.$dead" 2>&1 && fail "rank $dead killed: srun exited 0: $(cat "dead.$dead")"
	took=$((SECONDS - start))
	[ $took -lt 30 ] || fail "rank $dead killed: took $took s"
	for r in 0 1 2 3; do
		[ $r = $dead ] && continue
		grep -q "^world_check: rank $r: .*rank $dead \(([^)]*) \)\?died" "dead.$dead" ||
			fail "rank $r did not name rank $dead as dead: $(cat "dead.$dead")"
	done
	echo "ok   rank $dead (on n$((dead / 2 + 1))) killed: the others named it in $took s"
done

scancel "$SLURM_JOB_ID"
nodes_idle
echo "PASS: training, PyTorch env:// and rank failure across two network hosts"
