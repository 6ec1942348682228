#!/bin/bash
# A private Slurm cluster on this machine, for dljob's tests and quick start:
# munged (own key and socket), slurmctld, and two slurmd "nodes" (n1, n2;
# CLUSTER_NODES=N for n1..nN) on loopback using Slurm's multiple-slurmd support, select/cons_tres,
# proctrack/linuxproc, task/affinity, MpiDefault=none with pmix available,
# four fake GPUs per node as gres, and a plugstack.conf that loads the freshly
# built dljob.so.  Everything lives in one temp directory and is stopped by PID.
#
# Use as a library (tests):
#     source tests/cluster/cluster.sh
#     cluster_start                 # exports SLURM_CONF, CLUSTER_DIR
#     trap cluster_stop EXIT
#     srun -N2 -n2 hostname
#     cluster_alloc -N2 --exclusive --gres=gpu:4   # later sruns are steps of one allocation
#     cluster_plugstack "runtime=/x/dljob topology=/y.xml"   # slurmstepd re-reads it per step
# or as a command:
#     tests/cluster/cluster.sh start [DIR]   # prints 'export SLURM_CONF=…' lines
#     tests/cluster/cluster.sh stop DIR
#
# Needs root (slurmd), and Debian's slurmctld, slurmd, slurm-client, munge.
# Environment: DLJOB_SLURM_PREFIX (run the Slurm installed there, its bin/
# and sbin/ first on PATH, e.g. the one make check-slurm-current builds;
# default: Debian's; make check sets it from configure --with-slurm=DIR),
# DLJOB_SPANK (dljob.so to load; default: none loaded),
# DLJOB_PLUGSTACK_ARGS (its plugstack arguments), CLUSTER_GPUS (per node, 4),
# CLUSTER_CGROUP=1 (task/cgroup + proctrack/cgroup on cgroup v1 with
# ConstrainDevices=yes; needs the v1 devices controller at /sys/fs/cgroup;
# with CLUSTER_CONSTRAIN_CORES=1 also ConstrainCores=yes: each step's tasks
# and slurmstepd in a cpuset of the step's cores, needs the v1 cpuset one),
# CLUSTER_NODES=N (2 to 8 nodes n1..nN, default 2; each describes the whole
# machine with 1/N of its memory; not with CLUSTER_NETNS),
# CLUSTER_MPI_PORTS=LO-HI (MpiParams=ports=LO-HI: Slurm reserves ports for
# every step, SLURM_STEP_RESV_PORTS), CLUSTER_NETNS=1 (the nodes as separate
# network hosts, below).
#
# CLUSTER_NETNS=1: each node's slurmd runs in its own network namespace
# (dljob<tag>n1, ...n2), with one interface eth0 at 10.213.X.11 / .12 on a
# bridge whose root-namespace address 10.213.X.1 is where slurmctld and srun
# are reached, and its own UTS name (n1, n2) and /etc/hosts (a private mount
# namespace that maps n1 and n2 to those addresses), so MASTER_ADDR=n1
# resolves, binds and connects across a real interface.  (nsenter + unshare,
# not `ip netns exec`, which remounts /sys, and slurmd then dies on
# cgroups.)  cluster_stop deletes the namespaces and the bridge.

_cluster_log() { echo "cluster: $*" >&2; }

# slurm.conf's text, shared with tests/gpu/slurm-node.sh
# shellcheck source-path=SCRIPTDIR source=slurm-conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm-conf.sh" || return 1 2>/dev/null || exit 1

# A TCP port on 127.0.0.1 that nothing listens on, from a random start.
_cluster_free_ports() {
	local want=$1 p tries=0 got=()
	p=$(( 20000 + (RANDOM % 2000) * 10 ))
	while [ ${#got[@]} -lt "$want" ] && [ $tries -lt 2000 ]; do
		if ! ss -Htan "( sport = :$p )" 2>/dev/null | grep -q .; then
			got+=("$p")
		fi
		p=$((p + 1)); tries=$((tries + 1))
	done
	[ ${#got[@]} -eq "$want" ] || return 1
	echo "${got[@]}"
}

# Another Slurm than Debian's: its commands first on PATH (slurmctld and
# slurmd load their plugins from that installation's own plugin directory).
if [ -n "${DLJOB_SLURM_PREFIX-}" ]; then
	case ":$PATH:" in
	*":$DLJOB_SLURM_PREFIX/bin:$DLJOB_SLURM_PREFIX/sbin:"*) ;;
	*) export PATH="$DLJOB_SLURM_PREFIX/bin:$DLJOB_SLURM_PREFIX/sbin:$PATH" ;;
	esac
fi

_cluster_need() {
	local c
	if [ -n "${DLJOB_SLURM_PREFIX-}" ] && [ ! -x "$DLJOB_SLURM_PREFIX/sbin/slurmd" ]; then
		_cluster_log "DLJOB_SLURM_PREFIX=$DLJOB_SLURM_PREFIX has no sbin/slurmd"
		return 1
	fi
	for c in munged mungekey slurmctld slurmd srun sinfo scontrol ss; do
		command -v "$c" >/dev/null 2>&1 || {
			_cluster_log "missing command '$c': run contrib/install-deps.sh (Debian packages munge slurmctld slurmd slurm-client iproute2)"
			return 1
		}
	done
	[ "$(id -u)" -eq 0 ] || { _cluster_log "must run as root (slurmd needs it)"; return 1; }
}

# The nodes' names must resolve, as they do on a real cluster (MASTER_ADDR
# is the first node's name).  Map them to loopback once, marked as ours.
_cluster_hosts() {
	local n missing=
	for n in $(_cluster_names); do
		getent hosts "$n" >/dev/null 2>&1 || missing="$missing $n"
	done
	[ -z "$missing" ] && return 0
	echo "127.0.0.1$missing   # dljob test cluster (tests/cluster/cluster.sh)" >>/etc/hosts ||
		{ _cluster_log "cannot add$missing to /etc/hosts"; return 1; }
}

# The nodes' names: n1 n2 ... n$CLUSTER_NODES.
_cluster_names() {
	local i
	for ((i = 1; i <= ${CLUSTER_NODES:-2}; i++)); do echo "n$i"; done
}

cluster_plugstack() {
	local args=${1-${DLJOB_PLUGSTACK_ARGS-}}
	if [ -n "${DLJOB_SPANK-}" ]; then
		[ -f "$DLJOB_SPANK" ] || { _cluster_log "DLJOB_SPANK=$DLJOB_SPANK does not exist"; return 1; }
		echo "required $DLJOB_SPANK $args" >"$CLUSTER_DIR/plugstack.conf.new"
	else
		: >"$CLUSTER_DIR/plugstack.conf.new"
	fi
	mv -f "$CLUSTER_DIR/plugstack.conf.new" "$CLUSTER_DIR/plugstack.conf"
}

_cluster_write_conf() {
	local d=$1 pc=$2 gpus=$3 ports cpus sockets cores threads mem
	local proctrack=proctrack/linuxproc task=task/affinity
	# Random job ids keep clusters started at once on this machine (make
	# -j2 check) apart: Slurm names cgroups by job id, and a step's derived
	# MASTER_PORT comes from its job id, so two clusters counting from 1 at
	# the same pace would derive the same port on 127.0.0.1 at the same time.
	local firstjob=$(( (RANDOM * 32768 + RANDOM) % 60000000 + 1000 ))
	local ctl=127.0.0.1 nn=${CLUSTER_NODES:-2}
	read -r -a ports <<<"$4"
	[ -z "${CLUSTER_NETNS_SUBNET-}" ] || ctl=${CLUSTER_NETNS_SUBNET}1
	if [ -n "${CLUSTER_CGROUP-}" ]; then
		proctrack=proctrack/cgroup task=task/cgroup,task/affinity
		cat >"$d/cgroup.conf" <<EOF
# Generated by tests/cluster/cluster.sh (CLUSTER_CGROUP=1)
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
CgroupAutomount=no
ConstrainDevices=yes
ConstrainCores=$([ -n "${CLUSTER_CONSTRAIN_CORES-}" ] && echo yes || echo no)
ConstrainRAMSpace=no
EOF
	fi
	# Describe each node exactly as slurmd sees this machine, so none is
	# drained for a mismatch.
	read -r cpus sockets cores threads mem < <(slurm_conf_hw)
	[ -n "$cpus" ] || { _cluster_log "cannot read 'slurmd -C'"; return 1; }
	mem=$(( mem / nn ))
	slurm_conf_write "$d/slurm.conf" by=tests/cluster/cluster.sh dir="$d" name=dljobtest ctld="$ctl" port="$pc" \
		user=root pernode=1 proctrack="$proctrack" task="$task" firstjob="$firstjob" \
		mpiports="${CLUSTER_MPI_PORTS-}" || return 1
	local i h a
	for ((i = 1; i <= nn; i++)); do
		h=localhost a=127.0.0.1
		[ -z "${CLUSTER_NETNS_SUBNET-}" ] || h=n$i a=${CLUSTER_NETNS_SUBNET}1$i
		slurm_conf_node "n$i" "$h" "$a" "${ports[i - 1]}" "$cpus" "$sockets" "$cores" "$threads" "$mem" \
			"$([ "$gpus" -gt 0 ] && echo "gpu:$gpus")"
	done >>"$d/slurm.conf"
	slurm_conf_partition "n[1-$nn]" >>"$d/slurm.conf"
	: >"$d/gres.conf"
	echo "AutoDetect=off" >>"$d/gres.conf"
	if [ "$gpus" -gt 0 ]; then
		local i
		for i in $(seq 0 $((gpus - 1))); do
			# Fake GPUs: character devices 120:i (a major Linux reserves
			# for local use, no driver: open(2) fails with ENXIO, or with
			# EPERM where a device cgroup denies it).  Distinct numbers let
			# ConstrainDevices tell them apart.  Slurm takes the GPU index
			# from the file name's trailing number.
			mknod "$d/dev/nvidia$i" c 120 "$i" || return 1
		done
		echo "NodeName=n[1-$nn] Name=gpu File=$d/dev/nvidia[0-$((gpus - 1))]" >>"$d/gres.conf"
	fi
}

# Wait up to $2 seconds for command $1 to succeed.
_cluster_wait() {
	local cmd=$1 limit=$2 t=0
	while ! eval "$cmd" >/dev/null 2>&1; do
		sleep 0.1
		t=$((t + 1))
		[ $t -ge $((limit * 10)) ] && return 1
	done
	return 0
}

# CLUSTER_NETNS=1: the bridge, the two namespaces and their hosts file;
# sets CLUSTER_NETNS_TAG and CLUSTER_NETNS_SUBNET ("10.213.X."), recorded in
# $d/netns for cluster_stop.
_cluster_netns_up() {
	local d=$1 t x i tries=0
	command -v nsenter >/dev/null && command -v unshare >/dev/null && command -v ip >/dev/null ||
		{ _cluster_log "CLUSTER_NETNS=1 needs ip (iproute2), nsenter and unshare (util-linux)"; return 1; }
	while :; do
		x=$((RANDOM % 250 + 1))
		ip -br addr | grep -q " 10\.213\.$x\." || break
		tries=$((tries + 1))
		[ $tries -lt 50 ] || { _cluster_log "no free 10.213.X.0/24 subnet"; return 1; }
	done
	t=dljob$((RANDOM % 10000))
	CLUSTER_NETNS_TAG=$t CLUSTER_NETNS_SUBNET=10.213.$x.
	echo "$t" >"$d/netns"
	ip link add "${t}b" type bridge && ip addr add "${CLUSTER_NETNS_SUBNET}1/24" dev "${t}b" &&
		ip link set "${t}b" up || { _cluster_log "cannot make bridge ${t}b"; return 1; }
	for i in 1 2; do
		ip netns add "${t}n$i" &&
			ip link add "${t}h$i" type veth peer name "${t}p$i" &&
			ip link set "${t}h$i" master "${t}b" up &&
			ip link set "${t}p$i" netns "${t}n$i" &&
			ip -n "${t}n$i" link set "${t}p$i" name eth0 &&
			ip -n "${t}n$i" addr add "${CLUSTER_NETNS_SUBNET}1$i/24" dev eth0 &&
			ip -n "${t}n$i" link set eth0 up &&
			ip -n "${t}n$i" link set lo up ||
			{ _cluster_log "cannot make network namespace ${t}n$i"; return 1; }
	done
	# The nodes' own /etc/hosts: this machine's, with n1 and n2 at their
	# namespace addresses.
	{ grep -vE '(^|[[:space:]])n[12]([[:space:]]|$)' /etc/hosts
	  echo "${CLUSTER_NETNS_SUBNET}11 n1"
	  echo "${CLUSTER_NETNS_SUBNET}12 n2"; } >"$d/hosts" || return 1
}

_cluster_netns_down() {
	local d=$1 t i
	[ -f "$d/netns" ] || return 0
	t=$(cat "$d/netns")
	[ -n "$t" ] || return 0
	for i in 1 2; do
		ip netns del "${t}n$i" 2>/dev/null
	done
	ip link del "${t}b" 2>/dev/null
	rm -f "$d/netns"
}

# Start slurmd for node $1 (in its namespace under CLUSTER_NETNS).
_cluster_slurmd() {
	local n=$1 d=$CLUSTER_DIR
	if [ -z "${CLUSTER_NETNS_TAG-}" ]; then
		slurmd -N "$n"
		return
	fi
	# shellcheck disable=SC2016 # expanded by the inner shell
	nsenter --net="/run/netns/${CLUSTER_NETNS_TAG}$n" unshare --uts --mount sh -c \
		'mount --bind "$1/hosts" /etc/hosts && hostname "$2" && exec slurmd -N "$2"' sh "$d" "$n"
}

cluster_start() {
	# Another cluster (a parallel test) may grab the same ports between our
	# check and slurmctld's bind: try again with fresh ones.
	local attempt
	for attempt in 1 2 3; do
		_cluster_start_once "$@" && return 0
		_cluster_log "attempt $attempt failed; logs: $(tail -n 3 "$CLUSTER_DIR"/log/*.log 2>/dev/null | tr '\n' ' ' | cut -c1-600)"
		cluster_stop
	done
	return 1
}

_cluster_start_once() {
	_cluster_need || return 1
	_cluster_hosts || return 1
	local d=${1-}
	if [ -z "$d" ]; then
		d=$(mktemp -d /tmp/dljob-cluster.XXXXXX) || return 1
	fi
	case ${CLUSTER_NODES:-2} in
	[2-8]) ;;
	*) _cluster_log "CLUSTER_NODES=$CLUSTER_NODES: 2 to 8 nodes"; return 1 ;;
	esac
	if [ -n "${CLUSTER_NETNS-}" ] && [ "${CLUSTER_NODES:-2}" != 2 ]; then
		_cluster_log "CLUSTER_NETNS=1 makes two nodes, not CLUSTER_NODES=$CLUSTER_NODES"
		return 1
	fi
	local n
	mkdir -p "$d"/{munge,state,log,dev} || return 1
	for n in $(_cluster_names); do
		mkdir -p "$d/spool/$n" "$d/tmp/$n" || return 1
	done
	# munged refuses a socket directory that is not 755, and group/world
	# writable parents.
	chmod 755 "$d" "$d/munge" || return 1
	export CLUSTER_DIR=$d
	unset CLUSTER_NETNS_TAG CLUSTER_NETNS_SUBNET
	if [ -n "${CLUSTER_NETNS-}" ]; then
		_cluster_netns_up "$d" || return 1
	fi
	local ports pc pn
	ports=$(_cluster_free_ports $(( ${CLUSTER_NODES:-2} + 1 ))) || { _cluster_log "no free TCP ports"; return 1; }
	read -r pc pn <<<"$ports"
	_cluster_write_conf "$d" "$pc" "${CLUSTER_GPUS:-4}" "$pn" || return 1
	cluster_plugstack || return 1
	export SLURM_CONF=$d/slurm.conf

	mungekey -c -b 1024 -k "$d/munge/munge.key" >/dev/null 2>&1 || { _cluster_log "mungekey failed"; return 1; }
	chmod 600 "$d/munge/munge.key"
	munged --force --socket="$d/munge/munge.socket" --key-file="$d/munge/munge.key" \
		--pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
		--seed-file="$d/munge/munged.seed" 2>"$d/log/munged.err" ||
		{ _cluster_log "munged failed: $(cat "$d/log/munged.err")"; return 1; }
	_cluster_wait "test -S '$d/munge/munge.socket'" 60 || { _cluster_log "munged socket never appeared"; return 1; }

	slurmctld -i >"$d/log/slurmctld.out" 2>&1 || { _cluster_log "slurmctld failed: $(tail -5 "$d/log/slurmctld.log" 2>/dev/null)"; return 1; }
	_cluster_wait "scontrol ping | grep -q UP" 60 || { _cluster_log "slurmctld not answering: $(tail -5 "$d/log/slurmctld.log")"; return 1; }
	for n in $(_cluster_names); do
		_cluster_slurmd "$n" >"$d/log/slurmd.$n.out" 2>&1 ||
			{ _cluster_log "slurmd -N $n failed: $(tail -5 "$d/log/slurmd.$n.log" 2>/dev/null)"; return 1; }
	done
	if ! _cluster_wait "test \"\$(sinfo -h -N -o '%N %T' | grep -c ' idle$')\" -eq ${CLUSTER_NODES:-2}" 60; then
		_cluster_log "nodes not idle: $(sinfo -h -N -o '%N %T %E' 2>&1)"
		return 1
	fi
	_cluster_log "up in $d (Slurm $(slurmd -V 2>/dev/null | sed 's/^slurm //'), ctld :$pc, nodes $(_cluster_names | tr '\n' ' ')at :$pn)"
}

# Make one allocation (salloc arguments, default both nodes) and export
# SLURM_JOB_ID so that every following srun is a step inside it: steps start
# in ~50 ms, while a new job may first wait for the previous one to complete.
cluster_alloc() {
	local out jid
	[ $# -gt 0 ] || set -- -N2 --exclusive
	out=$(salloc --no-shell "$@" 2>&1)
	jid=$(echo "$out" | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
	[ -n "$jid" ] || { _cluster_log "salloc $* failed: $out"; return 1; }
	export SLURM_JOB_ID=$jid
}

_cluster_kill_pidfile() {
	local f=$1 pid i
	[ -f "$f" ] || return 0
	pid=$(cat "$f" 2>/dev/null)
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || return 0
	for i in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
}

cluster_stop() {
	local d=${1-${CLUSTER_DIR-}}
	[ -n "$d" ] && [ -d "$d" ] || return 0
	# Steps first, so no task outlives its slurmstepd.
	if [ -f "$d/slurm.conf" ]; then
		SLURM_CONF=$d/slurm.conf scancel --quiet --full --user=root 2>/dev/null
	fi
	local n
	for n in "$d"/slurmd.*.pid; do _cluster_kill_pidfile "$n"; done
	_cluster_kill_pidfile "$d/slurmctld.pid"
	_cluster_kill_pidfile "$d/munge/munged.pid"
	_cluster_netns_down "$d"
	if [ -z "${CLUSTER_KEEP-}" ]; then
		rm -rf "$d"
	else
		_cluster_log "kept $d"
	fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	case "${1-}" in
	start)
		cluster_start "${2-}" || { cluster_stop; exit 1; }
		echo "export SLURM_CONF=$SLURM_CONF CLUSTER_DIR=$CLUSTER_DIR"
		;;
	stop)
		[ -n "${2-}" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
		cluster_stop "$2"
		;;
	*)
		echo "usage: $0 start [DIR] | stop DIR" >&2
		exit 2
		;;
	esac
fi
