#!/bin/bash
# --dl-bind: each task's GPU, nearest NICs, NUMA node and own CPUs, with
# topology= pointing at a hand-made XML (the same answers as test_map), the
# task's own CPU binding (only the part that exists on this machine), and
# --dl-bind=none.  The fake GPUs of the test cluster are Slurm indexes 0-3:
# index i is the i-th GPU of the topology in PCI bus-id order.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
T=$DLJOB_SRCDIR/mapping/test/topologies
probe='echo "rank=$RANK gpu=$DLJOB_GPU cvd=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER hca=${NCCL_IB_HCA-} if=${NCCL_SOCKET_IFNAME-} numa=${DLJOB_NUMA-} cpus=${DLJOB_CPUS-} affinity=$(sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status)"'
allowed=$(srun_bounded -w n1 -n1 sed -n 's/^Cpus_allowed_list:\t//p' /proc/self/status) || fail "srun"

# 4 tasks on 4 GPUs of the 2-socket topology: GPUs 0,1 share mlx5_0, 2,3
# mlx5_1; the 4 GPUs of socket 0 split its 4 cores, one each.  (The file is
# not this machine's, so the plan is not confined to the step's CPUs; on a
# machine whose online CPUs are the file's 0-7 it would be: -O -c with all
# of n1's CPUs gives the step all of them.)  These steps run in one
# allocation of all of n1: Slurm 24.11 never starts a job whose -O -c puts
# more tasks on a node than it has CPUs (cons_tres counts -c as a per-task
# TRES, and then ignores -O: the job pends for "Resources" forever; 22.05
# overcommits), while a step of the allocation may, on both.
node_cpus=$(sinfo -h -n n1 -o %c) || fail "sinfo"
n1job=$(cluster_alloc -w n1 -N1 --exclusive --gres=gpu:4 --time=2 --immediate=60 && echo "$SLURM_JOB_ID") ||
	fail "no allocation of n1: $(squeue -h -o '%i %j %T reason=%r')"
cluster_plugstack "topology=$T/2s-8gpu-4hca.xml"
srun_bounded --jobid="$n1job" -n4 -O -c "$node_cpus" --gres=gpu:4 --dl-job=env --dl-bind=closest,verbose bash -c "$probe" >out.txt 2>err.txt ||
	fail "srun --dl-bind=closest,verbose: $(cat err.txt)"
i=0
for row in "0000:12:00.0 mlx5_0 ib0" "0000:13:00.0 mlx5_0 ib0" "0000:22:00.0 mlx5_1 ib1" "0000:23:00.0 mlx5_1 ib1"; do
	set -- $row
	grep -qE "^dljob: rank=$i local_rank=$i gpu=$i busid=$1 hca=$2 ifname=$3 numa=0 cpus=$i bound=[0-9,-]+ mem=skipped\(topology=\)$" err.txt ||
		fail "no verbose row for rank $i ($row) in:
$(cat err.txt)"
	line=$(grep "^rank=$i " out.txt) || fail "rank $i did not run: $(cat out.txt)"
	[[ "$line" == "rank=$i gpu=$i cvd=0,1,2,3 order=PCI_BUS_ID hca==$2 if==$3 numa=0 cpus="* ]] ||
		fail "rank $i environment: $line"
	# The XML's CPU i exists here only where Slurm allowed it.
	aff=${line##*affinity=}
	cpus=$(sed 's/.* cpus=\([^ ]*\) .*/\1/' <<<"$line")
	[ "$aff" = "$cpus" ] || fail "rank $i bound to $aff, DLJOB_CPUS=$cpus"
	i=$((i + 1))
done
echo "ok   4 tasks x 4 GPUs on 2s-8gpu-4hca.xml: GPU, HCA, interface, NUMA, one core each"

# verbose prints the node's table once (local task 0), the very table of
# `dljob topo` for the same topology, tasks and GPUs: one mapping code.
table() { grep -E '^dljob: (task  |[0-9]+ +[0-9-]+ |  +why: )' "$@"; }
[ "$(grep -c '^dljob: mapping of 4 tasks on n1, step GPUs 0,1,2,3, topology ' err.txt)" = 1 ] ||
	fail "no single table title in: $(cat err.txt)"
# The title says the plan covers all the file's CPUs, and why: the file is
# another machine's, or (where it is this one's) the step has every CPU.
grep -qE "^dljob: mapping of 4 tasks on n1, .*, within all CPUs \((the step's are not known: topology='s CPUs 0-7 are not this machine's online CPUs|Slurm's cores [0-9,-]+)\)$" err.txt ||
	fail "the title does not say which CPUs the plan is within: $(cat err.txt)"
"$DLJOB_BIN" topo --xml "$T/2s-8gpu-4hca.xml" --tasks 4 --gpus 0-3 >topo.txt || fail "dljob topo: $(cat topo.txt)"
table err.txt >launch.tbl
table topo.txt >topo.tbl
[ "$(wc -l <topo.tbl)" = 9 ] && cmp -s launch.tbl topo.tbl ||
	fail "the launch table differs from dljob topo's: $(diff launch.tbl topo.tbl) (launch: $(cat err.txt))"
grep -q "^dljob: *why: gpu: task 0 mod 4 step GPUs; hca: nearest: same PCIe switch, split: 2 GPUs over 1; ifname: the netdev of its HCA port; numa: of the GPU's Package P#0; cpus: NUMA 0 split 4 ways: 1 core$" topo.tbl ||
	fail "task 0's rules: $(cat topo.tbl)"
echo "ok   --dl-bind=verbose prints dljob topo's table once per node"

# No GPU in the step: NUMA nodes split between tasks; the XML's socket 1
# (CPUs 4-7) does not exist here, so that task keeps Slurm's binding.
srun_bounded --jobid="$n1job" -n2 -O -c "$node_cpus" --gres=none --dl-job=env --dl-bind=verbose bash -c "$probe" >out.txt 2>err.txt || fail "srun: $(cat err.txt)"
grep -q "^dljob: rank=0 local_rank=0 gpu=-1 busid=- hca=mlx5_0,mlx5_1 ifname=ib0,ib1 numa=0 cpus=0-3 " err.txt || fail "rank 0: $(cat err.txt)"
grep -q "^dljob: rank=1 local_rank=1 gpu=-1 busid=- hca=mlx5_2,mlx5_3 ifname=ib2,ib3 numa=1 cpus=4-7 " err.txt || fail "rank 1: $(cat err.txt)"
grep -q "^rank=1 gpu= .* numa=1 " out.txt || fail "rank 1 env: $(cat out.txt)"
echo "ok   CPU-only tasks: NUMA nodes split, CPUs that are not here are not used"

scancel "$n1job" || fail "scancel $n1job"

# Two steps' GPUs share one switch with 2 HCAs and 3 interfaces: split.
cluster_plugstack "topology=$T/shared-nic.xml"
srun_bounded -N2 -n4 --gres=gpu:2 --dl-job=env --dl-bind=closest bash -c "$probe" >out.txt 2>err.txt ||
	fail "srun on shared-nic.xml: $(cat err.txt)"
# (A new job right after scancel: n1 may still be completing the
# allocation, and srun then says it waits: no_wait_lines.)
[ -z "$(no_wait_lines <err.txt)" ] || fail "--dl-bind=closest printed something without verbose: $(cat err.txt)"
for r in 0 2; do grep -q "^rank=$r gpu=0 cvd=0,1 order=PCI_BUS_ID hca==mlx5_0 if==ib0 numa=0 " out.txt || fail "rank $r: $(cat out.txt)"; done
# Each GPU's interface is its own HCA port's netdev (before: ib1,eth0 for
# the second GPU, whatever was left of the 3 interfaces).
for r in 1 3; do grep -q "^rank=$r gpu=1 cvd=0,1 order=PCI_BUS_ID hca==mlx5_1 if==ib1 numa=0 " out.txt || fail "rank $r: $(cat out.txt)"; done
echo "ok   srun -N2 -n4 on shared-nic.xml: HCAs balanced between the GPUs that share them, each with its port's netdev"

# A user's own NCCL_IB_HCA wins.
out=$(NCCL_IB_HCA=mine srun_bounded -N1 -n1 --gres=gpu:1 --dl-job=env printenv NCCL_IB_HCA) || fail "srun"
[ "$out" = mine ] || fail "NCCL_IB_HCA=mine was replaced by $out"
echo "ok   the user's NCCL_IB_HCA is kept"

# --dl-bind=none: no NIC variables, no binding beyond Slurm's.
cluster_plugstack "topology=$T/2s-8gpu-4hca.xml"
srun_bounded -w n1 -n1 --gres=gpu:2 --dl-job=env --dl-bind=none bash -c "$probe" >out.txt 2>err.txt || fail "srun: $(cat err.txt)"
grep -qx "rank=0 gpu=0 cvd=0,1 order=PCI_BUS_ID hca= if= numa= cpus= affinity=$allowed" out.txt ||
	fail "--dl-bind=none: $(cat out.txt) (Slurm's CPUs: $allowed)"
echo "ok   --dl-bind=none sets only the GPU variables"

# This machine's own topology (no topology=): memory policy is applied too.
cluster_plugstack ""
srun_bounded -w n1 -n1 --dl-job=env --dl-bind=closest,verbose true 2>err.txt || fail "srun: $(cat err.txt)"
grep -qE "^dljob: rank=0 local_rank=0 gpu=-1 busid=- .* numa=[0-9,-]+ cpus=[0-9,-]+ bound=[0-9,-]+ mem=[0-9,-]+$" err.txt ||
	fail "live topology: $(cat err.txt)"
echo "ok   live topology: $(cat err.txt)"

# A node shared with another job: the plan is made within the step's own
# CPUs (shared_node_check, test_spank_lib.bash); here Slurm says which
# (its cores of the step), slurmstepd's affinity is every CPU.
shared_node_check "Slurm.s cores [0-9,-]*"
nodes_idle
