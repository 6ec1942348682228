#!/bin/bash
# Quick start on a fresh Debian 12 machine, as root: install what dljob needs,
# build it, start a private two-node Slurm cluster on this machine with the
# freshly built plugin, and train ResNet-20 on Fashion-MNIST through srun.
#
#   sudo contrib/quickstart.sh            # 1 epoch, 2 tasks on 2 nodes
#   EPOCHS=3 TASKS=4 sudo -E contrib/quickstart.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
EPOCHS=${EPOCHS:-1}
TASKS=${TASKS:-2}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}

bash contrib/install-deps.sh
[ -x configure ] || ./autogen.sh
mkdir -p _build
cd _build
[ -f Makefile ] || ../configure -q
make -j"$(nproc)" >/dev/null

export DLJOB_SRCDIR=$top DLJOB_SPANK=$top/_build/.libs/dljob.so
export DLJOB_PLUGSTACK_ARGS="runtime=$top/_build/dljob default_data=$DATA"
# shellcheck source=../tests/cluster/cluster.sh
source "$top/tests/cluster/cluster.sh"
cluster_start
bin=$(mktemp -d /tmp/dljob-quickstart-bin.XXXXXX)
trap 'cluster_stop; rm -rf "$bin"' EXIT
# In model mode the task's command, `dljob`, must be the plugin's runtime=
# found on the tasks' PATH (an installed dljob, on a real cluster): here the
# freshly built one, through a link on the PATH that srun passes on.
ln -s "$top/_build/dljob" "$bin/dljob"
export PATH="$bin:$PATH"
out=$(mktemp -d /tmp/dljob-quickstart.XXXXXX)
echo "quickstart: srun -N2 -n$TASKS --mpi=pmix --dl-job=resnet20 --dl-data=$DATA --dl-epochs=$EPOCHS --dl-out=$out dljob"
# Both "nodes" are this one host: Open MPI's shared-memory transport would
# crash across them, so the CPU collectives use TCP here.
OMPI_MCA_btl=self,tcp srun -N2 -n"$TASKS" --mpi=pmix --dl-job=resnet20 --dl-data="$DATA" \
	--dl-epochs="$EPOCHS" --dl-out="$out" dljob
echo "quickstart: metrics in $out/metrics.jsonl, weights in $out/model.safetensors"
grep '"top1"' "$out/metrics.jsonl" | tail -1
