#!/bin/bash
# --dl-bind: each task's GPU, nearest NICs, NUMA node and CPUs, with
# topology= pointing at a hand-made XML (the same answers as test_map), the
# task's own CPU binding (only the part that exists on this machine), and
# --dl-bind=none.  The fake GPUs of the test cluster are Slurm indexes 0-3:
# index i is the i-th GPU of the topology in PCI bus-id order.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
T=$DLJOB_SRCDIR/tests/slurm/topologies
probe='echo "rank=$RANK gpu=$DLJOB_GPU cvd=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER hca=${NCCL_IB_HCA-} if=${NCCL_SOCKET_IFNAME-} numa=${DLJOB_NUMA-} cpus=${DLJOB_CPUS-} affinity=$(sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status)"'
allowed=$(srun -w n1 -n1 sed -n 's/^Cpus_allowed_list:\t//p' /proc/self/status) || fail "srun"

# 4 tasks on 4 GPUs of the 2-socket topology: GPUs 0,1 share mlx5_0, 2,3 mlx5_1.
cluster_plugstack "topology=$T/2s-8gpu-4hca.xml"
srun -w n1 -n4 -O --gres=gpu:4 --dl-job=env --dl-bind=closest,verbose bash -c "$probe" >out.txt 2>err.txt ||
	fail "srun --dl-bind=closest,verbose: $(cat err.txt)"
i=0
for row in "0000:12:00.0 mlx5_0 ib0" "0000:13:00.0 mlx5_0 ib0" "0000:22:00.0 mlx5_1 ib1" "0000:23:00.0 mlx5_1 ib1"; do
	set -- $row
	grep -qE "^dljob: rank=$i local_rank=$i gpu=$i busid=$1 hca=$2 ifname=$3 numa=0 cpus=0-3 bound=[0-9,-]+ mem=skipped\(topology=\)$" err.txt ||
		fail "no verbose row for rank $i ($row) in:
$(cat err.txt)"
	line=$(grep "^rank=$i " out.txt) || fail "rank $i did not run: $(cat out.txt)"
	[[ "$line" == "rank=$i gpu=$i cvd=0,1,2,3 order=PCI_BUS_ID hca==$2 if==$3 numa=0 cpus="* ]] ||
		fail "rank $i environment: $line"
	# The XML's CPUs 0-3 exist here only where Slurm allowed them.
	aff=${line##*affinity=}
	cpus=$(sed 's/.* cpus=\([^ ]*\) .*/\1/' <<<"$line")
	[ "$aff" = "$cpus" ] || fail "rank $i bound to $aff, DLJOB_CPUS=$cpus"
	i=$((i + 1))
done
echo "ok   4 tasks x 4 GPUs on 2s-8gpu-4hca.xml: GPU, HCA, interface, NUMA, CPUs"

# Two steps' GPUs share one switch with 2 HCAs and 3 interfaces: split.
cluster_plugstack "topology=$T/shared-nic.xml"
srun -N2 -n4 --gres=gpu:2 --dl-job=env --dl-bind=closest bash -c "$probe" >out.txt 2>err.txt ||
	fail "srun on shared-nic.xml: $(cat err.txt)"
[ ! -s err.txt ] || fail "--dl-bind=closest printed something without verbose: $(cat err.txt)"
for r in 0 2; do grep -q "^rank=$r gpu=0 cvd=0,1 order=PCI_BUS_ID hca==mlx5_0 if==ib0 numa=0 " out.txt || fail "rank $r: $(cat out.txt)"; done
for r in 1 3; do grep -q "^rank=$r gpu=1 cvd=0,1 order=PCI_BUS_ID hca==mlx5_1 if==ib1,eth0 numa=0 " out.txt || fail "rank $r: $(cat out.txt)"; done
echo "ok   srun -N2 -n4 on shared-nic.xml: NICs balanced between the GPUs that share them"

# A user's own NCCL_IB_HCA wins.
out=$(NCCL_IB_HCA=mine srun -N1 -n1 --gres=gpu:1 --dl-job=env printenv NCCL_IB_HCA) || fail "srun"
[ "$out" = mine ] || fail "NCCL_IB_HCA=mine was replaced by $out"
echo "ok   the user's NCCL_IB_HCA is kept"

# No GPU in the step: NUMA nodes split between tasks; the XML's socket 1
# (CPUs 4-7) does not exist here, so that task keeps Slurm's binding.
cluster_plugstack "topology=$T/2s-8gpu-4hca.xml"
srun -w n1 -n2 --dl-job=env --dl-bind=verbose bash -c "$probe" >out.txt 2>err.txt || fail "srun: $(cat err.txt)"
grep -q "^dljob: rank=0 local_rank=0 gpu=-1 busid=- hca=mlx5_0,mlx5_1 ifname=ib0,ib1 numa=0 cpus=0-3 " err.txt || fail "rank 0: $(cat err.txt)"
grep -q "^dljob: rank=1 local_rank=1 gpu=-1 busid=- hca=mlx5_2,mlx5_3 ifname=ib2,ib3 numa=1 cpus=4-7 " err.txt || fail "rank 1: $(cat err.txt)"
grep -q "^rank=1 gpu= .* numa=1 " out.txt || fail "rank 1 env: $(cat out.txt)"
echo "ok   CPU-only tasks: NUMA nodes split, CPUs that are not here are not used"

# --dl-bind=none: no NIC variables, no binding beyond Slurm's.
srun -w n1 -n1 --gres=gpu:2 --dl-job=env --dl-bind=none bash -c "$probe" >out.txt 2>err.txt || fail "srun: $(cat err.txt)"
grep -qx "rank=0 gpu=0 cvd=0,1 order=PCI_BUS_ID hca= if= numa= cpus= affinity=$allowed" out.txt ||
	fail "--dl-bind=none: $(cat out.txt) (Slurm's CPUs: $allowed)"
echo "ok   --dl-bind=none sets only the GPU variables"

# This machine's own topology (no topology=): memory policy is applied too.
cluster_plugstack ""
srun -w n1 -n1 --dl-job=env --dl-bind=closest,verbose true 2>err.txt || fail "srun: $(cat err.txt)"
grep -qE "^dljob: rank=0 local_rank=0 gpu=-1 busid=- .* numa=[0-9,-]+ cpus=[0-9,-]+ bound=[0-9,-]+ mem=[0-9,-]+$" err.txt ||
	fail "live topology: $(cat err.txt)"
echo "ok   live topology: $(cat err.txt)"
nodes_idle
