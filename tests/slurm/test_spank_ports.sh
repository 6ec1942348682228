#!/bin/bash
# Rendezvous that cannot collide (issue 15).  A cluster with Slurm's
# per-step reserved ports (MpiParams=ports=...) and a one-port
# master_port_range, so every step without reserved ports derives the same
# MASTER_PORT:
#   - a step with reserved ports gets the first of SLURM_STEP_RESV_PORTS as
#     MASTER_PORT (env mode: what a PyTorch user gets), and two PyTorch
#     steps running at once on the same first node both run;
#   - without reserved ports (srun --resv-ports=0), another program holding
#     the derived port on the first node and two dljob steps starting at
#     once with that same port: both steps run, with exact sums;
#   - a malformed or overlong SLURM_STEP_RESV_PORTS fails the step, naming it.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
WC=${DLJOB_BUILDDIR:?}/world/test/world_check
STRANGER=$DLJOB_SRCDIR/world/test/world_stranger.py
# shellcheck disable=SC2034 # read by cluster.sh
CLUSTER_MPI_PORTS=$(_cluster_free_ports 1)
CLUSTER_MPI_PORTS="$CLUSTER_MPI_PORTS-$((CLUSTER_MPI_PORTS + 99))"
export CLUSTER_MPI_PORTS
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
one=$(_cluster_free_ports 1) || fail "no free port"
cluster_plugstack "master_port_range=$one-$one"
cluster_alloc -N2 --exclusive || fail "salloc"
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo

# 1. Reserved ports: MASTER_PORT is the step's first reserved port.
# (Its stderr must be empty too, but for srun's waiting lines: no_wait_lines.)
srun --overlap -N2 -n2 --dl-job=env bash -c 'echo "$MASTER_PORT $SLURM_STEP_RESV_PORTS"' >resv.out 2>resv.err ||
	fail "srun with reserved ports: $(cat resv.out resv.err)"
no_wait_lines <resv.err >>resv.out
read -r p list <<<"$(head -1 resv.out)"
[ "$(sort -u resv.out | wc -l)" = 1 ] && [ -n "$list" ] && [ "$p" = "${list%%[-,]*}" ] ||
	fail "MASTER_PORT is not the first of SLURM_STEP_RESV_PORTS: $(cat resv.out)"
[ "$p" != "$one" ] || fail "MASTER_PORT is the derived port despite reserved ports"
echo "ok   reserved ports $list: MASTER_PORT=$p"

# 2. Two PyTorch steps at once on the same first node (env mode, reserved
# ports): each gets its own MASTER_PORT, both run.
torch_step() {
	timeout 120 srun --overlap -N1 -n1 -w n1 --dl-job=env "${TORCH_PYTHON:-/usr/bin/python3}" -c '
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(2)
dist.all_reduce(t)
time.sleep(2)
print("torch ok port", os.environ["MASTER_PORT"], flush=True)
dist.destroy_process_group()
' >"torch.$1" 2>&1
}
torch_step a & ta=$!
torch_step b & tb=$!
wait $ta || fail "PyTorch step a failed: $(cat torch.a)"
wait $tb || fail "PyTorch step b failed: $(cat torch.b)"
pa=$(sed -n 's/^torch ok port //p' torch.a) pb=$(sed -n 's/^torch ok port //p' torch.b)
[ -n "$pa" ] && [ -n "$pb" ] && [ "$pa" != "$pb" ] || fail "PyTorch steps: ports '$pa' '$pb'"
echo "ok   two PyTorch env:// steps at once on n1: MASTER_PORT $pa and $pb, both ran"

# 3. No reserved ports: every step derives MASTER_PORT=$one.  A program of
# another step holds it on n1 (as a PyTorch rank 0 would), and two dljob
# steps start at once: both run with exact sums.
srun --overlap --resv-ports=0 -N1 -n1 -w n1 --dl-job=env bash -c \
	'[ "$MASTER_PORT" = '"$one"' ] || { echo "MASTER_PORT=$MASTER_PORT"; exit 1; }; exec python3 '"$STRANGER"' busy $MASTER_PORT' \
	>holder.out 2>&1 & holder=$!
for _ in $(seq 1 600); do
	ss -Hltn "( sport = :$one )" | grep -q . && break
	kill -0 $holder 2>/dev/null || fail "the holder step ended: $(cat holder.out)"
	sleep 0.1
done
ss -Hltn "( sport = :$one )" | grep -q . || fail "nothing holds port $one: $(cat holder.out)"
for s in a b; do
	timeout 60 srun --overlap --resv-ports=0 -N2 -n2 --dl-job=env "$WC" --timeout 20 --steps 1 \
		>"wc.$s" 2>&1 &
	eval "w$s=$!"
done
# shellcheck disable=SC2154 # wa, wb set by eval
{ wait "$wa" && wait "$wb"; } || fail "a step failed: $(cat wc.a wc.b)"
for s in a b; do
	for r in 0 1; do
		grep -q "^world_check: rank $r OK" "wc.$s" || fail "step $s rank $r: $(cat "wc.$s")"
	done
	grep -q "MASTER_PORT=$one is in use, so the rendezvous is on port" "wc.$s" ||
		fail "step $s did not move off the held port: $(cat "wc.$s")"
done
kill $holder 2>/dev/null
wait $holder 2>/dev/null
echo "ok   MASTER_PORT=$one held on n1, two steps at once with that port: both ran, sums exact"

# 4. A malformed SLURM_STEP_RESV_PORTS (here from the user's environment,
# with no reserved ports) fails the step naming it.
out=$(SLURM_STEP_RESV_PORTS=bogus srun --overlap --resv-ports=0 -N1 -n1 --dl-job=env true 2>&1) &&
	fail "a bogus SLURM_STEP_RESV_PORTS was accepted: $out"
grep -qF "dljob: SLURM_STEP_RESV_PORTS='bogus' is not a list of ports" <<<"$out" ||
	fail "no error naming SLURM_STEP_RESV_PORTS: $out"
long=$(printf '1,%.0s' $(seq 1 200))1
out=$(SLURM_STEP_RESV_PORTS=$long srun --overlap --resv-ports=0 -N1 -n1 --dl-job=env true 2>&1) &&
	fail "a 401-character SLURM_STEP_RESV_PORTS was accepted: $out"
grep -qF "dljob: SLURM_STEP_RESV_PORTS cannot be read" <<<"$out" ||
	fail "no error naming the overlong SLURM_STEP_RESV_PORTS: $out"
echo "ok   SLURM_STEP_RESV_PORTS=bogus or 401 characters long: the step fails naming it"

scancel "$SLURM_JOB_ID"
nodes_idle
echo "PASS: reserved ports, and a derived port held by others, never stop a step"
