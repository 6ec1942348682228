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
#   4. a rank killed mid-collective (on n2, then rank 0 on n1), over TCP and
#      under srun --mpi=pmix (PMIx bootstrap, Open MPI collectives): every
#      other rank names it within 30 s;
#   5. srun --mpi=pmix: the same training through PMIx and Open MPI's TCP
#      transport (with the plugin's --dl-job=env around it) equals one rank
#      with twice the batch; --dl-job=resnet20 (model mode) trains; and
#      `dljob eval` on 2 ranks gives the counts of one;
#   6. each node gets a bridge with the same address (as docker0 has on every
#      node), which Open MPI takes for a way to its peer: the PMIx world sets
#      OMPI_MCA_btl_tcp_if_include to the nodes' network itself (rank 0 says
#      so) and trains, as with DLJOB_COLLECTIVES=ring; a user's own wrong
#      setting (in the environment, or in an Open MPI parameter file) wins,
#      and the world fails in bounded time naming it;
#   7. n1's own /etc/hosts maps its name to 127.0.1.1 (Debian's default),
#      n2's to its address: rank 0 listens where n2 reaches it, not on
#      loopback, and says so; 2-rank training over TCP and under PMIx (the
#      star and ring) still equals one rank, and with 2 ranks per node the
#      one beside rank 0 finds it too; MASTER_ADDR=localhost on a
#      2-host step fails at once on rank 0, and the rank on n2 names the
#      address it tried.
# Open MPI runs with its defaults (no OMPI_MCA_* from the caller), as on a
# site that has not tuned it.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
FMNIST=/usr/share/datasets/fashion-mnist
WC=${DLJOB_BUILDDIR:?}/world/test/world_check
TORCH=${TORCH_PYTHON:-/usr/bin/python3}
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || fail "no $FMNIST (Debian package dataset-fashion-mnist)"
[ -x "${DLJOB_BIN:?}" ] || fail "build dljob first ($DLJOB_BIN)"
export CLUSTER_NETNS=1 DLJOB_PLUGSTACK_ARGS="runtime=$DLJOB_BIN" OMP_NUM_THREADS=1
for v in "${!OMPI_MCA_@}" "${!PMIX_MCA_@}"; do unset "$v"; done
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
# rel_err A B: the largest relative difference between two weight files.
rel_err() {
	"$TORCH" - "$1" "$2" <<'PY'
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
}
err=$(rel_err one/model.safetensors two/model.safetensors) || fail "cannot compare the weights"
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

# 4. A rank killed mid-collective, TCP world and PMIx + Open MPI: named
# everywhere (not timed out: the timeout is 20 s) in < 90 s (the step's
# start included, which a loaded machine stretches).
for mpi in none pmix; do
	for dead in 2 0; do
		start=$SECONDS
		timeout 120 srun --overlap -N2 -n4 --mpi=$mpi "$WC" --timeout 20 --steps 4 --die-at-step 2 \
			--rank $dead >"dead.$mpi.$dead" 2>&1 &&
			fail "--mpi=$mpi, rank $dead killed: srun exited 0: $(cat "dead.$mpi.$dead")"
		took=$((SECONDS - start))
		[ $took -lt 90 ] || fail "--mpi=$mpi, rank $dead killed: took $took s"
		grep -q "^world_check: ready method=${mpi/none/tcp} rank=$dead size=4 " "dead.$mpi.$dead" ||
			fail "--mpi=$mpi: not the ${mpi/none/tcp} world: $(cat "dead.$mpi.$dead")"
		for r in 0 1 2 3; do
			[ $r = $dead ] && continue
			grep -q "^world_check: rank $r: .*rank $dead \(([^)]*) \)\?died" "dead.$mpi.$dead" ||
				fail "--mpi=$mpi: rank $r did not name rank $dead as dead: $(cat "dead.$mpi.$dead")"
		done
		echo "ok   --mpi=$mpi: rank $dead (on n$((dead / 2 + 1))) killed: the others named it in $took s"
	done
done

# 5. srun --mpi=pmix: PMIx ranks, Open MPI's allreduce across the bridge.
timeout 120 srun --overlap -N2 -n2 --mpi=pmix --dl-job=env --export=ALL,DLJOB_WORLD_VERBOSE=1 \
	"$DLJOB_BIN" "${common[@]}" --batch 32 --out pmix >pmix.log 2>&1 ||
	fail "2 ranks under --mpi=pmix across the namespaces: $(tail -20 pmix.log)"
grep -q "2 ranks x batch 32" pmix.log || fail "--mpi=pmix: not 2 ranks: $(tail -20 pmix.log)"
for r in 0 1; do
	grep -q "^dljob: world pmix rank $r: .*MPI_Init" pmix.log ||
		fail "--mpi=pmix: rank $r did not join through PMIx and Open MPI: $(tail -20 pmix.log)"
done
err=$(rel_err one/model.safetensors pmix/model.safetensors) || fail "cannot compare the weights"
"$TORCH" -c "import sys; sys.exit(0 if float('$err') < 1e-4 else 1)" ||
	fail "2x32 under --mpi=pmix across the namespaces vs 1x64: rel err $err"
echo "ok   --mpi=pmix training across the bridge: 2x32 vs 1x64 after $K steps, rel err $err"

# Model mode (--dl-job=resnet20, the plugin runs the runtime) under PMIx.
timeout 120 srun --overlap -N2 -n2 --mpi=pmix --dl-job=resnet20 --dl-data="$FMNIST" --dl-batch=16 \
	--dl-out=model --export=ALL,DLJOB_WORLD_VERBOSE=1 "$DLJOB_BIN" --steps 2 --eval 0 >model.log 2>&1 ||
	fail "--mpi=pmix --dl-job=resnet20 across the namespaces: $(tail -20 model.log)"
if ! { grep -q "resnet20, .* 2 ranks x batch 16" model.log && grep -q "done after 2 steps" model.log &&
	[ "$(grep -c "^dljob: world pmix rank [01]: .*MPI_Init" model.log)" -eq 2 ]; }; then
	fail "--mpi=pmix --dl-job=resnet20: not 2 PMIx ranks trained: $(tail -20 model.log)"
fi
echo "ok   --mpi=pmix --dl-job=resnet20 (model mode) trained on 2 hosts through PMIx and Open MPI"

ev=(eval --model convnet --weights one/model.safetensors --data "fashion-mnist:$FMNIST")
"$DLJOB_BIN" "${ev[@]}" --json eval1.json >eval1.log 2>&1 || fail "dljob eval, 1 rank: $(tail -5 eval1.log)"
timeout 120 srun --overlap -N2 -n2 --mpi=pmix --dl-job=env "$DLJOB_BIN" "${ev[@]}" --json eval2.json \
	>eval2.log 2>&1 || fail "dljob eval under --mpi=pmix across the namespaces: $(tail -20 eval2.log)"
"$TORCH" - eval1.json eval2.json <<'PY' || fail "dljob eval: 2 ranks under --mpi=pmix differ from 1"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert (a["ranks"], b["ranks"]) == (1, 2), (a["ranks"], b["ranks"])
for k in ("samples", "correct", "top1", "top5", "per_class", "confusion"):
    assert a[k] == b[k], (k, a[k], b[k])
assert abs(a["loss"] - b["loss"]) <= 1e-6 * max(1.0, abs(a["loss"])), (a["loss"], b["loss"])
PY
echo "ok   dljob eval under --mpi=pmix on 2 hosts: the counts and loss of 1 rank"

# 6. A bridge with the same address on every node (docker0's 172.17.0.1 on
# real clusters): Open MPI believes it reaches its peer through it and never
# connects, unless told which interface joins the nodes.
for i in 1 2; do
	ns=${CLUSTER_NETNS_TAG:?}n$i
	if ! { ip -n "$ns" link add dock0 type bridge && ip -n "$ns" addr add 172.31.0.1/16 dev dock0 &&
		ip -n "$ns" link set dock0 up; }; then
		fail "cannot add a bridge to $ns"
	fi
done
# Nobody named it: dljob names the network through which n1 reaches n2.
for fix in DLJOB_WORLD_VERBOSE=1 DLJOB_COLLECTIVES=ring; do
	rm -rf dock
	timeout 120 srun --overlap -N2 -n2 --mpi=pmix --dl-job=env --export=ALL,$fix \
		"$DLJOB_BIN" "${common[@]}" --batch 32 --timeout 20 --out dock >dock.log 2>&1 ||
		fail "--mpi=pmix ($fix) beside a same-address bridge: $(tail -20 dock.log)"
	err=$(rel_err one/model.safetensors dock/model.safetensors) || fail "cannot compare the weights"
	"$TORCH" -c "import sys; sys.exit(0 if float('$err') < 1e-4 else 1)" ||
		fail "2x32 with $fix beside a same-address bridge vs 1x64: rel err $err"
	if [ $fix = DLJOB_WORLD_VERBOSE=1 ]; then
		grep -qxF "dljob: world pmix rank 0: Open MPI's TCP interface: dljob set OMPI_MCA_btl_tcp_if_include=${sub}0/24 (eth0, through which n1 reaches n2)" dock.log ||
			fail "--mpi=pmix beside a same-address bridge: rank 0 did not name ${sub}0/24: $(cat dock.log)"
		[ "$(grep -c "TCP interface" dock.log)" -eq 1 ] || fail "not one line from rank 0 alone: $(cat dock.log)"
		echo "ok   --mpi=pmix beside a same-address bridge: dljob chose ${sub}0/24 and 2x32 equals 1x64 (rel err $err)"
	else
		echo "ok   ... and with $fix (2x32 vs 1x64, rel err $err)"
	fi
done
# The user's word wins, even wrong: in the environment, or in an Open MPI
# parameter file (where an OMPI_MCA_ variable set by dljob would beat it and
# hide the mistake); the world then fails in bounded time, naming it.
# (The site's file stays in the list: it turns off the ofi transport, which
# would connect anyway.)
sysconf=$(ompi_info --path sysconfdir | sed -n 's/^ *Sysconfdir: *//p') && [ -d "$sysconf" ] ||
	fail "no Open MPI sysconfdir from ompi_info"
printf '# mine\nbtl_tcp_if_include = dock0\n' >"$WORK/mca.conf"
for how in OMPI_MCA_btl_tcp_if_include=dock0 \
	OMPI_MCA_mca_base_param_files=$WORK/mca.conf,$sysconf/openmpi-mca-params.conf; do
	case $how in
	OMPI_MCA_btl*) said="OMPI_MCA_btl_tcp_if_include='dock0' from the environment" ;;
	*) said="left to Open MPI's parameter files: $WORK/mca.conf sets btl_tcp_if_include" ;;
	esac
	start=$SECONDS
	# (in srun's environment: --export would split the file list at its comma)
	env "$how" timeout 120 srun --overlap -N2 -n2 --mpi=pmix --dl-job=env "$DLJOB_BIN" "${common[@]}" \
		--batch 32 --timeout 5 --out dock >dock.log 2>&1 && fail "--mpi=pmix with $how: exited 0"
	took=$((SECONDS - start))
	[ $took -lt 60 ] || fail "--mpi=pmix with $how: took $took s (timeout 5 s): $(tail dock.log)"
	[ "$(grep -c "^dljob: .*Open MPI's connections between the ranks did not come up in 5 s .*OMPI_MCA_btl_tcp_if_include.*; TCP interface: $said" dock.log)" -eq 2 ] ||
		fail "--mpi=pmix with $how: no clear error from both ranks: $(cat dock.log)"
	echo "ok   --mpi=pmix with $how beside a same-address bridge: left as set, both ranks named it in $took s"
done

# 7. Debian's "127.0.1.1 n1" in n1's /etc/hosts (n1's mount namespace only;
# n2 still resolves n1 to its address): rank 0 must not listen on loopback.
lo_pid=$(cat "$CLUSTER_DIR/slurmd.n1.pid") && [ -e "/proc/$lo_pid/ns/mnt" ] || fail "no slurmd pid for n1"
sed "s/^${sub//./\\.}11 n1\$/127.0.1.1 n1/" "$CLUSTER_DIR/hosts" >"$WORK/hosts.n1" || fail "hosts.n1"
grep -q "^127\.0\.1\.1 n1$" "$WORK/hosts.n1" || fail "no n1 line to change in $CLUSTER_DIR/hosts"
lo_undo() { nsenter --mount="/proc/$lo_pid/ns/mnt" umount /etc/hosts 2>/dev/null; }
trap 'lo_undo; _spank_cleanup' EXIT
nsenter --mount="/proc/$lo_pid/ns/mnt" mount --bind "$WORK/hosts.n1" /etc/hosts || fail "bind-mount n1's hosts"
srun --overlap -N2 -n2 bash -c 'echo "$(hostname) $(getent hosts n1 | cut -d" " -f1)"' | sort >lo.hosts 2>&1
printf 'n1 127.0.1.1\nn2 %s11\n' "$sub" | diff - lo.hosts >/dev/null || fail "n1 not at 127.0.1.1 on n1 only: $(cat lo.hosts)"
for w in tcp pmix; do
	rm -rf "lo$w"
	if [ $w = tcp ]; then how=(--mpi=none); else how=(--mpi=pmix --export=ALL,DLJOB_COLLECTIVES=ring); fi
	timeout 60 srun --overlap -N2 -n2 "${how[@]}" "$DLJOB_BIN" "${common[@]}" --batch 32 --timeout 10 \
		--out "lo$w" >"lo$w.log" 2>&1 || fail "$w, n1 at 127.0.1.1 in its /etc/hosts: $(tail -20 "lo$w.log")"
	what=MASTER_ADDR
	if [ $w = pmix ]; then what="the host name"; fi
	grep -q "^dljob: note: rank 0 on n1: $what 'n1' resolves to the loopback address 127.0.1.1 .* rank 0 listens on ${sub}11 instead" "lo$w.log" ||
		fail "$w: rank 0 did not say where it listens: $(cat "lo$w.log")"
	err=$(rel_err one/model.safetensors "lo$w/model.safetensors") || fail "cannot compare the weights"
	"$TORCH" -c "import sys; sys.exit(0 if float('$err') < 1e-4 else 1)" || fail "$w, 127.0.1.1: 2x32 vs 1x64: rel err $err"
	echo "ok   $w: n1 maps its name to 127.0.1.1: rank 0 listens on ${sub}11 and 2x32 equals 1x64 (rel err $err)"
done
# Two ranks per node: rank 1 shares n1 (and its /etc/hosts) with rank 0 and
# must find it off loopback too.
for mpi in none pmix; do
	how=(--mpi=$mpi)
	[ $mpi = pmix ] && how+=(--export=ALL,DLJOB_COLLECTIVES=ring)
	timeout 60 srun --overlap -N2 -n4 "${how[@]}" "$WC" --timeout 10 --steps 2 >"lo4.$mpi" 2>&1 ||
		fail "--mpi=$mpi, 4 ranks, n1 at 127.0.1.1 on n1: $(tail -20 "lo4.$mpi")"
	for r in 0 1 2 3; do
		grep -q "^world_check: rank $r OK" "lo4.$mpi" || fail "--mpi=$mpi, 4 ranks: rank $r: $(cat "lo4.$mpi")"
	done
	echo "ok   --mpi=$mpi: 4 ranks on 2 nodes with n1 at 127.0.1.1 on n1: every collective exact"
done
# MASTER_ADDR=localhost asks for loopback: rank 0 fails at once, naming it;
# rank 1 (on n2) fails at its timeout, naming the address it tried.
timeout 60 srun --overlap -N2 -n2 --mpi=none --export=ALL,MASTER_ADDR=localhost "$DLJOB_BIN" "${common[@]}" \
	--batch 32 --timeout 4 --out lolocal >lolocal.log 2>&1 && fail "MASTER_ADDR=localhost on 2 hosts: exited 0"
grep -q "MASTER_ADDR 'localhost' is the loopback address 127.0.0.1, but the job has ranks on n2, another host" lolocal.log ||
	fail "MASTER_ADDR=localhost: rank 0 did not say why: $(cat lolocal.log)"
grep -q "rank 1 found no rank 0 of this job at localhost (127.0.0.1" lolocal.log ||
	fail "MASTER_ADDR=localhost: rank 1 did not name the address it tried: $(cat lolocal.log)"
echo "ok   MASTER_ADDR=localhost on 2 hosts: rank 0 refuses it at once, rank 1 names 127.0.0.1"
lo_undo || fail "cannot unmount n1's hosts"
trap _spank_cleanup EXIT

scancel "$SLURM_JOB_ID"
nodes_idle
echo "PASS: training (TCP and PMIx), PyTorch env://, dljob eval, rank failure and a 127.0.1.1 host name across two network hosts"
