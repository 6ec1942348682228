#!/bin/bash
# The private Slurm cluster itself: it starts, runs steps on both nodes,
# runs batch jobs, and exposes the fake GPUs as gres.
. "$DLJOB_SRCDIR/tests/lib.sh"
with_cluster

nodes=$(sinfo -h -N -o '%N:%T' | sort | tr '\n' ' ')
check "two idle nodes ($nodes)" test "$nodes" = "n1:idle n2:idle "

out=$(srun -N2 -n2 -l printenv SLURMD_NODENAME 2>&1 | sort)
check "srun -N2 -n2 runs one task on each node ($(echo $out))" \
	test "$out" = "$(printf '0: n1\n1: n2')"

out=$(srun -N2 -n2 -l hostname 2>/dev/null | wc -l)
check "srun -N2 -n2 hostname prints two lines" test "$out" -eq 2

gpus=$(srun -N1 -n1 --gpus=2 printenv CUDA_VISIBLE_DEVICES 2>/dev/null)
check "gres gpu reaches the task (CUDA_VISIBLE_DEVICES=$gpus)" test "$gpus" = "0,1"

# Steps inside one allocation, as the other cluster tests run them.
check "salloc made an allocation" cluster_alloc -N2 --exclusive --gres=gpu:4
out=$(srun -N2 -n4 -l printenv SLURM_JOB_ID 2>&1 | sort -u | wc -l)
check "srun -n4 ran as a step of job $SLURM_JOB_ID" test "$out" -eq 4
scancel "$SLURM_JOB_ID"; unset SLURM_JOB_ID

out="$CLUSTER_DIR/batch.out"
jid=$(sbatch --parsable -N2 -o "$out" --wrap 'srun -l printenv SLURM_PROCID | sort' 2>&1)
check "sbatch accepted the job ($jid)" test -n "$jid"
for _ in $(seq 1 1200); do
	st=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	case "$st" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
	sleep 0.1
done
check "sbatch --wrap completed (state $st)" test "$st" = COMPLETED
check "batch output has both ranks" grep -q '^1: 1$' "$out"

finish
