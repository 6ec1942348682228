#!/bin/bash
# make check-cgroup2, inside the VM (tests/cgroup2/check_cgroup2.sh boots
# it; the image's dljob-cgroup2.service runs this from the host's share at
# /mnt/host, as root, then powers off).  A one-node cluster on a pure
# cgroup v2 host with systemd as PID 1: Debian 12's own munge, slurmctld
# and slurmd (22.05) with task/cgroup on cgroup/v2, ConstrainCores=yes and
# ConstrainDevices=yes, four fake GPUs /dev/nvidia0-3 (character devices
# 195:0-3, no driver: open(2) fails with ENXIO where the device filter
# lets it through, EPERM where Slurm's eBPF program denies it), and dljob
# installed from the project's .debs in /mnt/host/debs, as an admin does.
# Writes one "ok   - ..." or "FAIL - ..." line per check to
# /mnt/host/results.txt and "DONE" as its last line when it ran through.
set -u
PS4='+ $(cut -d" " -f1 /proc/uptime) '
H=/mnt/host
# A trace of every command, with the guest's uptime, in trace.log.
exec 19>"$H/trace.log"
BASH_XTRACEFD=19
set -x
R=$H/results.txt
W=/root/t
: >"$R"
ok()   { echo "ok   - $*" >>"$R"; echo "ok   - $*"; }
fail() { echo "FAIL - $*" >>"$R"; echo "FAIL - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; fi; }
finish() {
	mkdir -p "$H/logs"
	cp /var/log/slurm/*.log "$H/logs/" 2>/dev/null
	journalctl -b --no-pager >"$H/logs/journal.txt" 2>&1
	echo DONE >>"$R"
}
stop() { fail "$*"; finish; exit 1; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
# cpu_list LIST: the CPUs of a list such as 0-2,5, one per line.
cpu_list() {
	local r
	for r in ${1//,/ }; do
		if [[ $r == *-* ]]; then seq "${r%-*}" "${r#*-}"; else echo "$r"; fi
	done
}
# inside A B: every CPU of list A is in list B (A not empty).
inside() { [ -n "$1" ] && [ -z "$(comm -23 <(cpu_list "$1" | sort) <(cpu_list "$2" | sort))" ]; }
# disjoint A B: no CPU in both lists.
disjoint() { [ -z "$(comm -12 <(cpu_list "$1" | sort) <(cpu_list "$2" | sort))" ]; }
S() { timeout 180 srun "$@"; }

echo "uptime at the test's start: $(cut -d' ' -f1 /proc/uptime) s" >"$H/boot.txt"
mkdir -p "$W" && cd "$W" || stop "cd $W"

# ---- the node ------------------------------------------------------------------
check "systemd is PID 1 ($(cat /proc/1/comm))" test "$(cat /proc/1/comm)" = systemd
fs=$(stat -f -c %T /sys/fs/cgroup)
check "/sys/fs/cgroup is cgroup2 ($fs), controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>&1)" \
	test "$fs" = cgroup2fs
v1=$(awk '$3 == "cgroup" { print $2 }' /proc/mounts)
check "no cgroup v1 hierarchy is mounted${v1:+: $v1}" test -z "$v1"
check "the kernel offers cpuset to the unified hierarchy" grep -qw cpuset /sys/fs/cgroup/cgroup.controllers

# ---- dljob from the .debs ------------------------------------------------------
debs=$(ls "$H"/debs/dljob_*.deb "$H"/debs/slurm-spank-dljob_*.deb 2>/dev/null)
[ "$(wc -w <<<"$debs")" -eq 2 ] || stop "expected dljob and slurm-spank-dljob .debs in $H/debs: $debs"
# shellcheck disable=SC2086
dpkg -i $debs >install.log 2>&1 || { cat install.log; stop "dpkg -i of the .debs failed: $(tail -5 install.log)"; }
ok "dpkg -i $(basename -a $debs | tr '\n' ' ')"
check "dljob --version runs: $(dljob --version 2>&1 | head -1)" dljob --version
conf=/etc/slurm/plugstack.conf.d/dljob.conf
line=$(sed -n 's/^#required /required /p' "$conf")
[ -n "$line" ] || stop "no commented required line in $conf"
read -r _ so args <<<"$line"
# The admin enables the snippet's line; no dataset here (env mode and
# `dljob --version` need none).
args=$(sed -e 's| data_allow=[^ ]*||' -e 's| default_data=[^ ]*||' <<<" $args")
plugstack() { echo "required $so$args $*" >"$conf"; }
plugstack
check "the installed plugin $so exists" test -f "$so"

# ---- Slurm ---------------------------------------------------------------------
host=$(hostname)
# The VM has no network (qemu -nic none), and slurmd's and slurmctld's
# getaddrinfo(AI_ADDRCONFIG) for their listening sockets finds nothing with
# loopback alone: a dummy interface with an address, the node's name on it.
ip link add dljob0 type dummy && ip addr add 10.99.0.1/24 dev dljob0 && ip link set dljob0 up ||
	stop "cannot make the dummy interface dljob0"
printf '127.0.0.1 localhost\n10.99.0.1 %s\n' "$host" >/etc/hosts
for i in 0 1 2 3; do
	rm -f /dev/nvidia$i
	mknod -m 666 /dev/nvidia$i c 195 $i || stop "mknod /dev/nvidia$i"
done
node=$(slurmd -C | head -1 | sed 's/ UpTime=.*//')
[[ $node == NodeName=$host\ * ]] || stop "slurmd -C: $node"
cat >/etc/slurm/slurm.conf <<EOF
ClusterName=cg2
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=slurm
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmdDebug=debug
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
$node Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
cat >/etc/slurm/cgroup.conf <<EOF
CgroupPlugin=cgroup/v2
ConstrainCores=yes
ConstrainDevices=yes
EOF
printf 'AutoDetect=off\nNodeName=%s Name=gpu File=/dev/nvidia[0-3]\n' "$host" >/etc/slurm/gres.conf
dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
for u in munge slurmctld slurmd; do
	timeout 120 systemctl start $u ||
		stop "systemctl start $u: $(systemctl list-jobs 2>&1; systemctl status $u 2>&1 | tail -20)"
done
for _ in $(seq 60); do
	[ "$(timeout 20 sinfo -h -n "$host" -o %T 2>/dev/null)" = idle ] && break
	for u in slurmctld slurmd; do
		systemctl is-active -q $u ||
			stop "$u is not running: $(systemctl status $u 2>&1 | tail -5; tail -20 /var/log/slurm/$u.log)"
	done
	sleep 1
done
[ "$(sinfo -h -n "$host" -o %T)" = idle ] ||
	stop "the node is not idle: $(sinfo 2>&1) $(tail -20 /var/log/slurm/slurmd.log)"
ok "slurmctld and slurmd (Slurm $(sinfo -V | cut -d' ' -f2)) run, node $host idle: $node"
cfg=$(scontrol show config)
check "TaskPlugin is task/cgroup ($(grep -E '^TaskPlugin ' <<<"$cfg" | tr -s ' '))" \
	grep -qE '^TaskPlugin += .*task/cgroup' <<<"$cfg"
check "slurmd's cgroup.conf: CgroupPlugin=cgroup/v2 ConstrainCores=yes ConstrainDevices=yes" \
	grep -qE '^CgroupPlugin += cgroup/v2' <<<"$cfg"
export SLURM_TIMELIMIT=10

# ---- a job without --dl-* ------------------------------------------------------
cg=$(S -n1 cat /proc/self/cgroup 2>&1)
check "a task is in its own cgroup v2 task cgroup: $cg" \
	grep -qE '^0::/.*/job_[0-9]+/step_0/user/task_0$' <<<"$cg"
out=$(S -n2 --gres=gpu:2 bash -c 'echo "rank=$SLURM_PROCID cvd=${CUDA_VISIBLE_DEVICES-} dl=$(env | grep -c -E "^(DLJOB_|RANK=|LOCAL_RANK=|WORLD_SIZE=|MASTER_ADDR=|MASTER_PORT=)")"' 2>&1)
check "a job without --dl-* is unchanged: Slurm's CUDA_VISIBLE_DEVICES=0,1, no DLJOB_/RANK/MASTER_ variable: $(echo $out)" \
	test "$(sort <<<"$out" | tr '\n' ' ')" = "rank=0 cvd=0,1 dl=0 rank=1 cvd=0,1 dl=0 "

# ---- env mode ------------------------------------------------------------------
out=$(S -n2 --dl-job=env bash -c 'echo "rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"' 2>&1)
check "--dl-job=env -n2: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT: $(echo $out)" \
	bash -c "[ \"\$(grep -c -E '^rank=([01]) local=\\1 world=2 master=$host:[0-9]+\$' <<<\"$out\")\" = 2 ] &&
		[ \"\$(sort -u <<<\"$out\" | wc -l)\" = 2 ]"

# ---- model mode ----------------------------------------------------------------
out=$(S -n1 --dl-job=resnet20 --dl-data="$W" dljob --version 2>&1)
check "--dl-job=resnet20 runs the installed runtime: $(echo $out)" grep -q '^dljob ' <<<"$out"
out=$(S -n1 --dl-job=resnet20 --dl-data="$W" /bin/true 2>&1)
rc=$?
check "--dl-job=resnet20 refuses a task that is not the site's runtime (rc $rc): $(echo $out | cut -c1-300)" \
	bash -c "[ $rc -ne 0 ] && grep -q 'is /bin/true, not the runtime /usr/bin/dljob' <<<'$(echo $out | tr -d "'")'"

# ---- the mapping's CPU split: two jobs sharing the node -----------------------
# Each job has one core; its task is planned and bound inside its own job's
# cpuset, read from the task's own cgroup v2 (cpuset.cpus.effective), and
# the two jobs' CPUs are disjoint.
probe='cg=$(sed -n "s/^0:://p" /proc/self/cgroup); echo "rank=$RANK cpus=${DLJOB_CPUS-} affinity=$(sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status) cgcpus=$(cat /sys/fs/cgroup$cg/cpuset.cpus.effective) cg=$cg"'
rm -f a.out
srun -n1 -J dljob-a --dl-job=env --dl-bind=closest,verbose bash -c "$probe; exec sleep 120" >a.out 2>a.err &
apid=$!
for _ in $(seq 600); do [ -s a.out ] && break; sleep 0.2; done
S -n1 -J dljob-b --dl-job=env --dl-bind=closest,verbose bash -c "$probe" >b.out 2>b.err
brc=$?
running=$(squeue -h -n dljob-a -o %T)
scancel -n dljob-a
wait $apid 2>/dev/null
a=$(cat a.out) b=$(cat b.out)
check "two jobs ran at once (B rc $brc, A $running): A: $a / B: $b" test $brc = 0 -a "$running" = RUNNING
for j in a b; do
	l=$(cat $j.out)
	cpus=$(field cpus "$l") aff=$(field affinity "$l") cgc=$(field cgcpus "$l")
	check "job ${j^^}: DLJOB_CPUS=$cpus and its affinity $aff are inside its own v2 cpuset $cgc" \
		bash -c "$(declare -f cpu_list inside); inside '$cpus' '$cgc' && inside '$aff' '$cgc'"
	within=$(sed -nE "s/^dljob: mapping of 1 task on $host, .*, within CPUs ([0-9,-]+) \(.*$/\1/p" $j.err)
	check "job ${j^^}: the plan's 'within' CPUs ${within:-(none)} are its cpuset $cgc ($(grep -o 'within CPUs .*' $j.err))" \
		test -n "$within" -a "$(cpu_list "$within" | tr '\n' ,)" = "$(cpu_list "$cgc" | tr '\n' ,)"
	check "job ${j^^}: --dl-bind=closest,verbose printed the table and the rank's row" \
		grep -q '^dljob: rank=0 local_rank=0 gpu=.* cpus=.* bound=' $j.err
done
check "the two jobs' cpusets and DLJOB_CPUS are disjoint: A $(field cgcpus "$a")/$(field cpus "$a"), B $(field cgcpus "$b")/$(field cpus "$b")" \
	bash -c "$(declare -f cpu_list disjoint); disjoint '$(field cgcpus "$a")' '$(field cgcpus "$b")' && disjoint '$(field cpus "$a")' '$(field cpus "$b")'"

# Two steps of one job (2 cores) at once, one core each (--exact): on v2
# slurmstepd is in the job's cpuset (both cores), so the step's own CPUs
# come from Slurm's cores of the step; each task is planned and bound in
# its own step's v2 cpuset, and the two are disjoint.
cat >steps.sh <<'EOS'
srun -n1 --exact --dl-job=env --dl-bind=closest,verbose bash -c "$PROBE; exec sleep 120" >sa.out 2>sa.err &
for _ in $(seq 600); do [ -s sa.out ] && break; sleep 0.2; done
srun -n1 --exact --dl-job=env --dl-bind=closest,verbose bash -c "$PROBE" >sb.out 2>sb.err
echo "rc=$? a=$(squeue -h -s -j "$SLURM_JOB_ID" -o %i | grep -c "^$SLURM_JOB_ID\.0$")" >steps.rc
scancel "$SLURM_JOB_ID.0"
wait
EOS
PROBE=$probe timeout 300 salloc -n2 bash steps.sh >steps.log 2>&1
a=$(cat sa.out 2>/dev/null) b=$(cat sb.out 2>/dev/null)
check "two steps of one job ran at once ($(cat steps.rc 2>/dev/null)): A: $a / B: $b" \
	grep -q -x 'rc=0 a=1' steps.rc
for j in a b; do
	l=$(cat s$j.out 2>/dev/null)
	cpus=$(field cpus "$l") aff=$(field affinity "$l") cgc=$(field cgcpus "$l")
	within=$(sed -nE "s/^dljob: mapping of 1 task on $host, .*, within CPUs ([0-9,-]+) \(.*$/\1/p" s$j.err 2>/dev/null)
	check "step ${j^^}: DLJOB_CPUS=$cpus, its affinity $aff and the plan's within ${within:-(none)} are its own step's v2 cpuset $cgc ($(grep -o 'within CPUs .*' s$j.err))" \
		bash -c "$(declare -f cpu_list inside); inside '$cpus' '$cgc' && inside '$aff' '$cgc' &&
			[ \"\$(cpu_list '$within' | tr '\n' ,)\" = \"\$(cpu_list '$cgc' | tr '\n' ,)\" ]"
done
check "the two steps' cpusets and DLJOB_CPUS are disjoint: A $(field cgcpus "$a")/$(field cpus "$a"), B $(field cgcpus "$b")/$(field cpus "$b")" \
	bash -c "$(declare -f cpu_list disjoint); [ -n '$a' ] && [ -n '$b' ] && disjoint '$(field cgcpus "$a")' '$(field cgcpus "$b")' && disjoint '$(field cpus "$a")' '$(field cpus "$b")'"

# ---- GPU visibility under the v2 device filter ---------------------------------
# As tests/slurm/test_spank_gpus_cgroup.sh on v1: the fake GPUs' bus ids
# come from a topology file with 8 GPUs; open= lists the GPUs (node
# indexes) the task can open.
plugstack "topology=$H/2s-8gpu-4hca.xml"
gprobe='o=; for i in 0 1 2 3; do e=$( (exec 9</dev/nvidia$i) 2>&1); case $e in *"No such device"*) o=$o$i;; *"not permitted"*) ;; *) echo "open nvidia$i: $e" >&2;; esac; done
echo "rank=$RANK gpu=${DLJOB_GPU-} cvd=${CUDA_VISIBLE_DEVICES-} bus=${DLJOB_GPU_BUSID-} open=$o"'
bus=(0000:12:00.0 0000:13:00.0 0000:22:00.0 0000:23:00.0)
# unbound NAME WANT_CVD STEP_GPUS [OPEN]: OPEN, the GPUs each task can open
# (default STEP_GPUS)
unbound() {
	local name=$1 want=$2 step=$3 open=${4:-$3} line gpu used='' why=''
	[ "$(wc -l <out.txt)" -eq 2 ] || why="expected 2 tasks"
	grep -q "open nvidia" err.txt && why="unexpected open error"
	while read -r line; do
		[ "$(field cvd "$line")" = "$want" ] || why="CUDA_VISIBLE_DEVICES is not $want"
		[ "$(field open "$line")" = "$open" ] || why="the task can open other GPUs than $open"
		gpu=$(field gpu "$line")
		[[ $gpu =~ ^[01]$ ]] || { why="DLJOB_GPU=$gpu"; continue; }
		[ "$(field bus "$line")" = "${bus[${step:$gpu:1}]}" ] || why="DLJOB_GPU_BUSID is not GPU ${step:$gpu:1}'s"
		used=$used$gpu
	done <out.txt
	[ "$(fold -w1 <<<"$used" | sort -u | wc -l)" -eq 2 ] || why=${why:-tasks share a GPU}
	if [ -z "$why" ]; then
		ok "$name: every task sees $want (node GPUs $step, can open exactly $open), DLJOB_GPU is its own, bus ids match"
	else
		fail "$name: $why: $(cat out.txt err.txt | tr '\n' ' ' | cut -c1-600)"
	fi
}
# bound NAME STEP_GPUS: each task can open one GPU of the step, not the
# same; it keeps Slurm's CUDA_VISIBLE_DEVICES=0, DLJOB_GPU=0, no bus id.
bound() {
	local name=$1 step=$2 line o used='' why=''
	[ "$(wc -l <out.txt)" -eq 2 ] || why="expected 2 tasks"
	grep -q "open nvidia" err.txt && why="unexpected open error"
	while read -r line; do
		o=$(field open "$line")
		[[ $o =~ ^[$step]$ ]] || why="Slurm's v2 device filter does not confine the task to one GPU of $step"
		[ "$(field cvd "$line")" = 0 ] || why="CUDA_VISIBLE_DEVICES=$(field cvd "$line") is not Slurm's 0 (the task can open only GPU $o)"
		[ "$(field gpu "$line")" = 0 ] || why="DLJOB_GPU is not 0"
		[ -z "$(field bus "$line")" ] || why="DLJOB_GPU_BUSID=$(field bus "$line") set, but the task's node GPU is unknown"
		used=$used$o
	done <out.txt
	[ "$(fold -w1 <<<"$used" | sort -u | wc -l)" -eq 2 ] || why=${why:-tasks share a GPU}
	if [ -z "$why" ]; then
		ok "$name: each task can open only its GPU (node GPUs $used), keeps CUDA_VISIBLE_DEVICES=0, DLJOB_GPU=0"
	else
		fail "$name: $why: $(cat out.txt err.txt | tr '\n' ' ' | cut -c1-600)"
	fi
}
gpurun() { S -n2 "$@" --dl-job=env bash -c "$gprobe" >out.txt 2>err.txt || echo "srun $*: rc $?" >>err.txt; }
gpurun --gres=gpu:2
unbound "--gres=gpu:2 -n2" 0,1 01
gpurun --gpus-per-task=1
bound "--gpus-per-task=1 -n2" 01
gpurun --gres=gpu:2 --gpu-bind=single:1
bound "--gres=gpu:2 --gpu-bind=single:1 -n2" 01
# Another job holds GPUs 0 and 1: the step gets the node's GPUs 2,3.
hold=$(sbatch --parsable -n1 --gres=gpu:2 --wrap 'sleep 300' -o /dev/null)
for _ in $(seq 300); do [ "$(squeue -h -j "$hold" -o %T)" = RUNNING ] && break; sleep 0.2; done
if [ "$(squeue -h -j "$hold" -o %T)" = RUNNING ]; then
	gpurun -O --gres=gpu:2
	unbound "--gres=gpu:2 -n2 next to a job on GPUs 0,1" 0,1 23
	gpurun -O --gpus-per-task=1
	bound "--gpus-per-task=1 -n2 next to a job on GPUs 0,1" 23
else
	fail "the job holding GPUs 0,1 did not start: $(squeue 2>&1)"
fi
scancel "$hold"
# ConstrainDevices=no: Slurm still binds the tasks, but nothing confines
# them: every task can open all the node's GPUs, and dljob widens
# CUDA_VISIBLE_DEVICES to the step's list, DLJOB_GPU each task's own.
sed -i 's/^ConstrainDevices=yes$/ConstrainDevices=no/' /etc/slurm/cgroup.conf
timeout 120 systemctl restart slurmd
for _ in $(seq 60); do
	[ "$(timeout 20 sinfo -h -n "$host" -o %T 2>/dev/null)" = idle ] && break
	sleep 1
done
gpurun --gpus-per-task=1
unbound "ConstrainDevices=no --gpus-per-task=1 -n2" 0,1 01 0123
sed -i 's/^ConstrainDevices=no$/ConstrainDevices=yes/' /etc/slurm/cgroup.conf
plugstack
# How the plugin told (slurmstepd's log, SlurmdDebug=debug): the device
# filter refused the other 3 GPUs to each bound task, none without
# ConstrainDevices.
log=/var/log/slurm/slurmd.log
n=$(grep -c 'dljob: cgroup v2: task [01] may open 1 of /dev/nvidia<N>, 3 refused by the device filter, step GPUs 2$' $log)
check "the plugin saw the v2 device filter refuse the other 3 GPUs to $n bound tasks (6 expected)" test "$n" -ge 6
check "and refuse none with ConstrainDevices=no" \
	grep -q 'dljob: cgroup v2: task [01] may open 4 of /dev/nvidia<N>, 0 refused by the device filter, step GPUs 2$' $log

systemctl stop slurmd slurmctld munge
finish
