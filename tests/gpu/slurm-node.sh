#!/bin/bash
# A GPU node under Slurm (issue 37 part 4): after bundle-build.sh has built
# dljob from the offline bundle, start a one-node private Slurm cluster from
# the bundle's own Debian packages (munge, slurmctld, slurmd, slurm-client,
# slurm-wlm-basic-plugins, unpacked in WORK/prefix: the GPU machine has no
# Slurm) with the node's GPUs as gres and the just-built dljob.so in its
# plugstack.conf, and run the checks below.  This file is copied into the
# bundle; on the GPU machine, in one device call:
#
#   bash gpu-bundle/bundle-build.sh && bash gpu-bundle/slurm-node.sh
#
#   --fake-gpus N   no GPU: N fake character devices (major 120, no driver)
#                   as gres, the hand-made topology 2s-8gpu-4hca.xml for the
#                   plugin, gloo instead of NCCL, eval on cpu (the check
#                   here: bundle-selftest.sh runs it with N=2)
#   --work DIR      bundle-build.sh's work directory (default
#                   /tmp/dljob-bundle, or $DLJOB_BUNDLE_WORK); its env.sh
#                   names the build
#   --keep          leave the cluster's directory (config, logs) in place
#
# Checks, each a "PASS name" or "FAIL name: why" line:
#   libraries  every Slurm/munge program and plugin loads the bundle's
#              libraries only (ldd: the prefix, or the C library's own)
#   cluster    munged, slurmctld and slurmd up, the node idle with gpu:N
#   resnet50   srun -n1 --gres=gpu:1 --dl-job=resnet50 --dl-bind=closest,verbose
#              dljob --backend cuda --steps 5 ... on a tiny generated
#              ImageFolder (224x224, batch 16): trains, writes its weights.
#              Fake GPUs: the same step must end in the CUDA module's "no
#              CUDA device is visible" (the module loaded in the step; the
#              cpu and ref backends refuse the GPU the plugin gives a task),
#              then a step without gres trains 3 steps on cpu (64x64, batch 2)
#   bind       the verbose row names the GPU's PCI bus id (real: hwloc's
#              topology of this machine = nvidia-smi's; fake: the XML's first)
#   first-step srun -> the first training step's line (ms, printed; with the
#              CUDA module loaded on a GPU), and an empty step's round trip
#   env        srun --gres=gpu:1 --dl-job=env python3 -c <torch all-reduce>:
#              env:// from the plugin's RANK/MASTER_ADDR/...; NCCL on the GPU
#              (1 task), gloo on the CPU with --fake-gpus (2 tasks)
#   eval       dljob eval --backend cuda|cpu of the weights resnet50 wrote
# and at the end "slurm-node: N passed, N failed" (exit status 0 only if none
# failed).  Logs: $OUT/slurm-node.log (everything above, with each command's
# output) and $OUT/slurm-node-logs.tgz (slurm.conf, gres.conf,
# plugstack.conf, the daemons' logs); without OUT, WORK/out/.
#
# Runs as root (the device machines' commands do, KINDS.md).  Not root:
# SlurmUser and SlurmdUser become the invoking user, and the fake devices
# plain files (mknod needs root).  Checked here as nobody with --fake-gpus 2:
# every check passed but bind, as Slurm gives a step no GPU from a plain
# file (CUDA_VISIBLE_DEVICES unset); /dev/nvidia* are character devices.  Nothing is written
# outside WORK and one temporary directory: slurmd is given the prefix's
# slurmstepd (-d), slurm.conf the prefix's PluginDir, munged its key, socket
# and files; the node is this machine's host name when that resolves (else
# localhost), so MASTER_ADDR resolves without touching /etc/hosts.  Where
# other clusters may run (this development machine), wrap it in
# `flock /tmp/dljob-cluster.lock`.
#
# Environment: TORCH_PYTHON (default python3: the one with torch),
# DLJOB_PY_LD_LIBRARY_PATH (LD_LIBRARY_PATH for python3; default: the one
# this script was started with, not env.sh's: torch loads its own CUDA
# libraries), STEPS (training steps, default 5; 3 with --fake-gpus).
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=${DLJOB_BUNDLE_WORK:-/tmp/dljob-bundle}
fake=0 keep=0
while [ $# -gt 0 ]; do
	case $1 in
	--fake-gpus) fake=${2:-}; shift
		case $fake in [1-8]) ;; *) echo "slurm-node: --fake-gpus takes 1 to 8, not '$fake'" >&2; exit 2 ;; esac ;;
	--work) work=${2:?--work needs a directory}; shift ;;
	--keep) keep=1 ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "slurm-node: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
py_ld=${DLJOB_PY_LD_LIBRARY_PATH-${LD_LIBRARY_PATH-}}
py=${TORCH_PYTHON:-python3}
out=${OUT:-$work/out}
mkdir -p "$out" || exit 1
log=$out/slurm-node.log
: >"$log" || exit 1
t_start=$(date +%s)
say() { echo "[$(date -u +%T) +$(( $(date +%s) - t_start ))s] slurm-node: $*" | tee -a "$log"; }
npass=0 nfail=0 d=""
pass() { npass=$((npass + 1)); say "PASS $*"; }
fail() { nfail=$((nfail + 1)); say "FAIL $*"; }
# run NAME CMD...: CMD's output into the log (and on the terminal), its status back
run() {
	local name=$1 rc; shift
	echo "---- $name: $*" >>"$log"
	"$@" 2>&1 | tee -a "$log"
	rc=${PIPESTATUS[0]}
	echo "---- $name: exit $rc" >>"$log"
	return "$rc"
}
stop_cluster() {
	local f pid i
	[ -n "${d:-}" ] && [ -d "$d" ] || return 0
	[ -f "$d/slurm.conf" ] && scancel --quiet --full --user="$(id -un)" >/dev/null 2>&1
	for f in "$d/slurmd.pid" "$d/slurmctld.pid" "$d/munge/munged.pid"; do
		pid=$(cat "$f" 2>/dev/null) || continue
		[ -n "$pid" ] && kill "$pid" 2>/dev/null || continue
		for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null
	done
	tar czf "$out/slurm-node-logs.tgz" -C "$d" slurm.conf gres.conf plugstack.conf log 2>/dev/null
	if [ "$keep" = 1 ]; then say "kept $d"; else rm -rf "$d"; fi
	d=""
}
finish() {
	stop_cluster
	echo "slurm-node: $npass passed, $nfail failed" | tee -a "$log"
	[ "$nfail" = 0 ] && [ "$npass" -gt 0 ]
	exit $?
}

# slurm.conf's text, shared with tests/cluster/cluster.sh: beside this file
# in the bundle (tests/gpu/bundle.sh copies it), in tests/cluster/ in a checkout
conf_lib=$here/slurm-conf.sh
[ -f "$conf_lib" ] || conf_lib=$here/../cluster/slurm-conf.sh
# shellcheck source-path=SCRIPTDIR source=../cluster/slurm-conf.sh
. "$conf_lib" || { fail "setup: cannot read $conf_lib"; finish; }
[ -f "$work/env.sh" ] || { fail "setup: no $work/env.sh: run bundle-build.sh first (--work)"; finish; }
# shellcheck disable=SC1091
. "$work/env.sh"
P=$work/prefix
SL=$P/usr/lib/x86_64-linux-gnu/slurm-wlm
[ -x "$P/usr/sbin/slurmd-wlm" ] && [ -d "$SL" ] ||
	{ fail "setup: no Slurm in $P: the bundle lacks the Slurm packages (make it again with tests/gpu/bundle.sh)"; finish; }
# the Slurm programs and munged find the bundle's libraries first (their
# RUNPATH is Debian's /usr/lib/x86_64-linux-gnu/slurm-wlm, which
# LD_LIBRARY_PATH overrides); slurmd passes it to slurmstepd, srun to the tasks
export LD_LIBRARY_PATH=$SL:$P/usr/lib/x86_64-linux-gnu:$P/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
d=$(mktemp -d /tmp/dljob-slurm-node.XXXXXX) || { fail "setup: mktemp"; finish; }
# only these programs of the prefix on PATH (its /usr/bin also holds make,
# pkgconf, ...); Debian's daemons are slurmd-wlm etc., named slurmd by
# update-alternatives when the package is installed, which unpacking skips
mkdir -p "$d/bin" || exit 1
for c in usr/sbin/slurmctld-wlm usr/sbin/slurmd-wlm usr/sbin/slurmstepd-wlm usr/bin/srun usr/bin/sinfo usr/bin/scontrol \
	usr/bin/squeue usr/bin/scancel usr/bin/salloc usr/bin/sbatch usr/sbin/munged usr/sbin/mungekey usr/bin/munge usr/bin/unmunge; do
	[ -x "$P/$c" ] || { fail "setup: no $P/$c in the bundle"; finish; }
	n=${c##*/}
	ln -s "$P/$c" "$d/bin/${n%-wlm}" || exit 1
done
export PATH=$d/bin:$PATH
export SLURM_CONF=$d/slurm.conf
pyenv=(env -u LD_LIBRARY_PATH)
[ -n "$py_ld" ] && pyenv=(env LD_LIBRARY_PATH="$py_ld")

say "work $work, cluster $d, log $log, $( [ "$fake" -gt 0 ] && echo "$fake fake GPUs" || echo "the real GPUs")"
say "host $(uname -srm), $(nproc) CPUs, uid $(id -u), slurmd $(slurmd -V 2>&1), munged $(munged --version 2>&1 | head -1)"

trap 'say "interrupted"; stop_cluster; exit 1' INT TERM

# ---- libraries -------------------------------------------------------------------------------
check_libs() {
	local f bad="" n=0 o
	for f in "$d"/bin/* "$SL"/*.so; do
		[ -e "$f" ] || continue
		n=$((n + 1))
		o=$(ldd "$(readlink -f "$f")" 2>&1)
		bad="$bad$(echo "$o" | grep "not found" | sed "s|^|$(basename "$f"): |")"
		bad="$bad$(echo "$o" | sed -n 's/^\s*\([^ ]*\) => \(\/[^ ]*\) .*/\1 \2/p' |
			grep -vE "^lib(c|m|dl|rt|pthread|resolv|util|stdc\+\+|gcc_s)\.so\.[0-9]+ " | grep -v " $P/" |
			sed "s|^|$(basename "$f"): |")"
	done
	if [ -z "$bad" ] && [ "$n" -gt 50 ]; then
		pass "libraries: $n Slurm and munge programs and plugins load the bundle's libraries only"
	else
		echo "$bad" >>"$log"
		fail "libraries: of $n programs and plugins, not from $P: $(echo "$bad" | head -5 | tr '\n' ';')"
	fi
}
check_libs

# ---- the cluster -----------------------------------------------------------------------------
free_ports() { # free_ports N: N TCP ports nothing listens on, from /proc (no ss on the GPU machine)
	local used p got=() h
	used=" $(awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		while read -r h; do echo $((16#$h)); done | tr '\n' ' ') "
	p=$(( 20000 + (RANDOM % 2000) * 10 ))
	while [ ${#got[@]} -lt "$1" ]; do
		case $used in *" $p "*) ;; *) got+=("$p") ;; esac
		p=$((p + 1))
	done
	echo "${got[@]}"
}
wait_for() { # wait_for SECONDS CMD...
	local limit=$1 i; shift
	for ((i = 0; i < limit * 10; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
node_idle() { [ "$(sinfo -h -N -o '%N %T' | awk '{print $2}')" = idle ]; }

start_cluster() {
	local me cpus sockets cores threads mem pc pn ngpu devs=() i node user
	me=$(id -un)
	user=root
	[ "$(id -u)" = 0 ] || user=$me
	mkdir -p "$d"/{munge,state,log,spool,tmp,dev,data,jobs} && chmod 755 "$d" "$d/munge" || return 1
	# the node's name: MASTER_ADDR is the step's first node, which must resolve
	node=$(hostname -s 2>/dev/null)
	if [ -z "$node" ] || ! getent hosts "$node" >/dev/null 2>&1; then node=localhost; fi
	NODE=$node
	if [ "$fake" -gt 0 ]; then
		for ((i = 0; i < fake; i++)); do
			if [ "$user" = root ]; then
				mknod "$d/dev/nvidia$i" c 120 "$i" || return 1
			else
				: >"$d/dev/nvidia$i" || return 1
			fi
			devs+=("$d/dev/nvidia$i")
		done
	else
		for i in /dev/nvidia[0-9]*; do [ -c "$i" ] && devs+=("$i"); done
		[ ${#devs[@]} -gt 0 ] || { say "no /dev/nvidia[0-9]* character device on this machine"; return 1; }
	fi
	ngpu=${#devs[@]}
	NGPU=$ngpu
	read -r cpus sockets cores threads mem < <(slurm_conf_hw)
	[ -n "${cpus:-}" ] || { say "cannot read 'slurmd -C': $(slurmd -C 2>&1 | head -3)"; return 1; }
	CPUS=$cpus
	read -r pc pn <<<"$(free_ports 2)"
	slurm_conf_write "$d/slurm.conf" by="slurm-node.sh: a one-node private cluster from the bundle's Slurm" \
		dir="$d" name=dljobgpu port="$pc" user="$user" plugindir="$SL" || return 1
	slurm_conf_node "$node" "$node" 127.0.0.1 "$pn" "$cpus" "$sockets" "$cores" "$threads" "$mem" "gpu:$ngpu" >>"$d/slurm.conf"
	slurm_conf_partition "$node" >>"$d/slurm.conf"
	{
		echo "AutoDetect=off"
		# Slurm takes a GPU's index from its file's trailing number
		for i in "${devs[@]}"; do echo "NodeName=$node Name=gpu File=$i"; done
	} >"$d/gres.conf"
	: >"$d/plugstack.conf"
	mungekey -c -b 1024 -k "$d/munge/munge.key" >/dev/null 2>&1 || { say "mungekey failed"; return 1; }
	chmod 600 "$d/munge/munge.key"
	munged --force --socket="$d/munge/munge.socket" --key-file="$d/munge/munge.key" \
		--pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
		--seed-file="$d/munge/munged.seed" >"$d/log/munged.out" 2>&1 ||
		{ say "munged failed: $(cat "$d/log/munged.out" "$d/log/munged.log" 2>/dev/null | tail -5)"; return 1; }
	wait_for 30 test -S "$d/munge/munge.socket" || { say "munged's socket never appeared"; return 1; }
	slurmctld -i >"$d/log/slurmctld.out" 2>&1 ||
		{ say "slurmctld failed: $(tail -5 "$d/log/slurmctld.out" "$d/log/slurmctld.log" 2>/dev/null)"; return 1; }
	wait_for 60 sh -c 'scontrol ping | grep -q UP' ||
		{ say "slurmctld not answering: $(tail -5 "$d/log/slurmctld.log" 2>/dev/null)"; return 1; }
	slurmd -N "$node" -d "$P/usr/sbin/slurmstepd-wlm" >"$d/log/slurmd.out" 2>&1 ||
		{ say "slurmd failed: $(tail -5 "$d/log/slurmd.out" "$d/log/slurmd.log" 2>/dev/null)"; return 1; }
	wait_for 60 node_idle ||
		{ say "node not idle: $(sinfo -h -N -o '%N %T %E' 2>&1); $(tail -5 "$d/log/slurmd.log" 2>/dev/null)"; return 1; }
	say "up: node $node, $cpus CPUs, gres gpu:$ngpu (${devs[*]}), ctld :$pc, slurmd :$pn"
	sinfo -N -o '%N %T %c %m %G' >>"$log" 2>&1
}
t_up=$(date +%s%N)
if start_cluster; then
	pass "cluster: munged, slurmctld and slurmd up, node $NODE idle with gpu:$NGPU in $(( ($(date +%s%N) - t_up) / 1000000 )) ms"
else
	fail "cluster: not started (above; logs in slurm-node-logs.tgz)"
	finish
fi

# ---- the plugin and the data ------------------------------------------------------------------
spank=$DLJOB_BUILDDIR/.libs/dljob.so
[ -f "$spank" ] || { fail "setup: no $spank (bundle-build.sh builds it)"; finish; }
src=${DLJOB_SRCDIR:-$here/..}
topo=""
[ "$fake" -gt 0 ] && topo="topology=$src/mapping/test/topologies/2s-8gpu-4hca.xml"
echo "required $spank runtime=$DLJOB_BIN data_allow=$d/data $topo" >"$d/plugstack.conf"
cat "$d/plugstack.conf" >>"$log"
if [ "$fake" -gt 0 ]; then
	# the GPU step on --backend cuda too (the module finds no device), then
	# training through the plugin on cpu in a step without GPUs
	backend=cpu batch=2 img=64 per=4 steps=${STEPS:-3} env_tasks=2 env_backend=gloo
else
	backend=cuda batch=16 img=224 per=16 steps=${STEPS:-5} env_tasks=1 env_backend=nccl
fi
run data "${pyenv[@]}" "$py" "$src/tests/tiny_imagefolder.py" "$d/data/tiny" "$per" ||
	{ fail "setup: cannot write the tiny ImageFolder with $py (needs PIL)"; finish; }

# ---- resnet50 and the first step -------------------------------------------------------------
# stamp T0 FILE: copy the lines through, FILE gets the ms from T0 to the first step's line
stamp() {
	local l
	while IFS= read -r l; do
		case $l in "step 1/"*) [ -s "$2" ] || echo $(( ($(date +%s%N) - $1) / 1000000 )) >"$2" ;; esac
		printf '%s\n' "$l"
	done
}
# r50 NAME BACKEND SRUN-OPTION...: srun --dl-job=resnet50 into $d/NAME.txt,
# the weights into $d/jobs/NAME, ms to the first step in $d/NAME.first;
# sets rc and total (ms)
r50() {
	local name=$1 be=$2 t0; shift 2
	t0=$(date +%s%N)
	echo "---- $name: srun $* --dl-job=resnet50 ... --backend $be" >>"$log"
	timeout -k 5 150 srun -n1 -c "$CPUS" "$@" --dl-job=resnet50 --dl-bind=closest,verbose --dl-data="$d/data/tiny" \
		--dl-batch="$batch" --dl-out="$d/jobs/$name" "$DLJOB_BIN" --backend "$be" --steps "$steps" --eval 0 \
		--print-every 1 --image-size "$img" 2>&1 | stamp "$t0" "$d/$name.first" | tee "$d/$name.txt" | tee -a "$log"
	rc=${PIPESTATUS[0]}
	total=$(( ($(date +%s%N) - t0) / 1000000 ))
}
trained() { # trained NAME BACKEND
	grep -q "resnet50, .* $2 backend, 1 rank" "$d/$1.txt" && grep -q "done after $steps steps" "$d/$1.txt" &&
		[ -s "$d/jobs/$1/model.safetensors" ]
}
cd "$d/jobs" || exit 1
r50 r50 cuda --gres=gpu:1
weights=$d/jobs/r50/model.safetensors
if [ "$fake" = 0 ]; then
	if [ "$rc" = 0 ] && trained r50 "$backend"; then
		pass "resnet50: srun --gres=gpu:1 --dl-job=resnet50 --dl-bind=closest,verbose trained $steps steps on $backend in $total ms"
	else
		fail "resnet50: srun exit $rc, or no '$backend backend' header, 'done after $steps steps' or r50/model.safetensors (log)"
	fi
elif [ "$rc" != 0 ] && grep -q "no CUDA device is visible" "$d/r50.txt"; then
	# the cpu and ref backends refuse the GPU the plugin gives the task
	# (--gpu N is not supported): the GPU step runs the CUDA module, as on a
	# GPU machine, which finds no device behind the fake ones
	pass "resnet50: srun --gres=gpu:1 --dl-job=resnet50 --dl-bind=closest,verbose --backend cuda: the module loaded in the step and found no device (fake GPUs), $total ms"
else
	fail "resnet50: srun --gres=gpu:1 --backend cuda on fake GPUs: exit $rc, not the module's 'no CUDA device is visible' (log)"
fi
row=$(grep -m1 '^dljob: rank=0 ' "$d/r50.txt")
busid=$(sed -n 's/.* busid=\([^ ]*\) .*/\1/p' <<<"$row")
if [ "$fake" -gt 0 ]; then
	want=0000:12:00.0   # 2s-8gpu-4hca.xml's first GPU
else
	# nvidia-smi's 00000000:19:00.0 is hwloc's 0000:19:00.0
	want=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | tr 'A-F' 'a-f' | sed 's/^0000\(....:\)/\1/')
fi
if [ -n "$busid" ] && [ "$busid" = "$want" ]; then
	pass "bind: the verbose row names GPU $busid$([ "$fake" = 0 ] && echo " (hwloc's topology of this machine = nvidia-smi's)"): $row"
else
	fail "bind: the verbose row's bus id '${busid}' is not '${want:-nvidia-smi gave none}': ${row:-no 'dljob: rank=0' row}"
fi
first=$d/r50.first
if [ "$fake" -gt 0 ]; then
	# training through the plugin on the CPU: a step without the GPUs
	r50 r50cpu cpu
	weights=$d/jobs/r50cpu/model.safetensors
	if [ "$rc" = 0 ] && trained r50cpu cpu; then
		pass "resnet50: srun (no gres) --dl-job=resnet50 --dl-bind=closest,verbose trained $steps steps on cpu in $total ms"
	else
		fail "resnet50: srun (no gres) --backend cpu: exit $rc, or no 'cpu backend' header, 'done after $steps steps' or weights (log)"
	fi
	first=$d/r50cpu.first
fi
if [ -s "$first" ]; then
	pass "first-step: srun -> first step (resnet50, $([ "$fake" = 0 ] && echo "cuda, the CUDA module loaded" || echo cpu)) $(cat "$first") ms"
else
	fail "first-step: no 'step 1/' line came"
fi
t0=$(date +%s%N)
if timeout -k 5 30 srun -n1 --gres=gpu:1 true >>"$log" 2>&1; then
	pass "first-step: srun -n1 --gres=gpu:1 true round trip $(( ($(date +%s%N) - t0) / 1000000 )) ms"
else
	fail "first-step: srun -n1 --gres=gpu:1 true failed"
fi

# ---- env: a torch all-reduce ---------------------------------------------------------------------
read -r -d '' allreduce <<'PY'
import os, sys
import torch
import torch.distributed as dist
backend = os.environ["SLURM_NODE_BACKEND"]
dist.init_process_group(backend, init_method="env://")
r, n = dist.get_rank(), dist.get_world_size()
if backend == "nccl":
    dev = torch.device("cuda", int(os.environ.get("DLJOB_GPU", "0")))
    torch.cuda.set_device(dev)
else:
    dev = torch.device("cpu")
t = torch.full((1 << 20,), float(r + 1), device=dev)
dist.all_reduce(t)
want = n * (n + 1) / 2
ok = bool((t == want).all().item())
extra = ""
if backend == "nccl":
    v = torch.cuda.nccl.version()
    v = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    extra = " nccl=%s gpu=%s" % (v, torch.cuda.get_device_name(dev))
print("allreduce rank=%d/%d backend=%s device=%s CUDA_VISIBLE_DEVICES=%s MASTER=%s:%s sum=%g want=%g%s %s" % (
    r, n, backend, dev, os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("MASTER_ADDR"),
    os.environ.get("MASTER_PORT"), t[0].item(), want, extra, "ok" if ok else "WRONG"), flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
PY
t0=$(date +%s%N)
export SLURM_NODE_BACKEND=$env_backend
run env timeout -k 5 120 srun -n"$env_tasks" --gres=gpu:1 --dl-job=env \
	"${pyenv[@]}" "$py" -c "$allreduce" >"$d/env.txt" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(grep -c "^allreduce rank=.* backend=$env_backend .* ok$" "$d/env.txt")" = "$env_tasks" ]; then
	pass "env: srun -n$env_tasks --gres=gpu:1 --dl-job=env torch $env_backend all-reduce in $(( ($(date +%s%N) - t0) / 1000000 )) ms: $(grep -m1 '^allreduce rank=0' "$d/env.txt")"
else
	fail "env: srun --dl-job=env torch $env_backend all-reduce: exit $rc, $(grep -c ' ok$' "$d/env.txt") of $env_tasks ranks ok: $(tail -3 "$d/env.txt" | tr '\n' ' ')"
fi

# ---- eval ---------------------------------------------------------------------------------------------
if [ -s "$weights" ]; then
	t0=$(date +%s%N)
	run eval timeout -k 5 120 "$DLJOB_BIN" eval --model resnet50 --weights "$weights" --data "$d/data/tiny" \
		--image-size "$img" --backend "$backend" --batch "$batch" --json "$d/eval.json" >"$d/eval.txt" 2>&1
	rc=$?
	cat "$d/eval.json" >>"$log" 2>/dev/null
	n=$(grep -o '"samples": *[0-9]*' "$d/eval.json" 2>/dev/null | head -1 | grep -o '[0-9]*$')
	if [ "$rc" = 0 ] && [ "${n:-0}" = $((2 * per)) ]; then
		pass "eval: dljob eval --backend $backend of resnet50's weights: $n samples in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	else
		fail "eval: dljob eval --backend $backend: exit $rc, samples ${n:-none} (want $((2 * per))): $(tail -3 "$d/eval.txt" | tr '\n' ' ')"
	fi
else
	fail "eval: no weights from resnet50 to evaluate"
fi
finish
