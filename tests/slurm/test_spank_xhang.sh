#!/bin/bash
# Another user listening on an X display socket (the abstract
# \0/tmp/.X11-unix/X<n> and the file /tmp/.X11-unix/X<n>) that accepts and
# never answers must not stall a --dl-* step: the plugin loads the live
# topology in slurmstepd without hwloc's gl/opencl/cuda/... components, so
# nothing connects to it and the step runs in normal time.  (Before, hwloc's
# gl component called XOpenDisplay from slurmstepd and the step hung.)
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
py=${TORCH_PYTHON:-/usr/bin/python3}

# The listener: the first free display of :0-:9 (hwloc tries them all),
# abstract socket and, where /tmp/.X11-unix lets us, the file socket.  The
# displays are the whole machine's, not this cluster's: any process that
# loads hwloc with I/O discovery (Open MPI's MPI_Init, lstopo) tries them,
# also one of a test running beside this one (make -j2 check).  So only a
# connection from a process of this cluster (its SLURM_CONF, which slurmd
# and every slurmstepd inherit) is counted and held open in silence; any
# other is closed at once (it sees no X server, as without this test) and
# logged in x.foreign: it must neither hang another test nor fail this one.
"$py" - "$WORK/x.count" "$WORK/x.ready" "$SLURM_CONF" <<'PY' &
import os, socket, struct, sys, select
count_file, ready_file, conf = sys.argv[1], sys.argv[2], sys.argv[3]
mine = b"SLURM_CONF=" + os.fsencode(conf)

def peer(c):
    """(pid, True when the peer process belongs to this cluster)"""
    try:
        pid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        with open("/proc/%d/environ" % pid, "rb") as f:
            return pid, mine in f.read().split(b"\0")
    except OSError:
        return -1, False
socks = []
for n in range(10):
    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        a.bind("\0/tmp/.X11-unix/X%d" % n)
    except OSError:
        a.close()
        continue
    a.listen(64)
    socks.append(a)
    path = "/tmp/.X11-unix/X%d" % n
    try:
        if not os.path.isdir("/tmp/.X11-unix"):
            os.mkdir("/tmp/.X11-unix")
            os.chmod("/tmp/.X11-unix", 0o1777)
            open(ready_file + ".dir", "w").write("created")
        if not os.path.exists(path):
            f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            f.bind(path)
            f.listen(64)
            socks.append(f)
            open(ready_file + ".file", "w").write(path)
    except OSError:
        pass
    break
if not socks:
    sys.exit("no free X display socket")
open(ready_file, "w").write("ready")
held, accepted = [], 0
while True:
    r, _, _ = select.select(socks, [], [], 0.5)
    for s in r:
        c, _ = s.accept()
        pid, ours = peer(c)
        if not ours:
            try:
                cmd = open("/proc/%d/cmdline" % pid, "rb").read().replace(b"\0", b" ")
            except OSError:
                cmd = b"?"
            with open(ready_file + ".foreign", "ab") as f:
                f.write(b"pid %d: %s\n" % (pid, cmd))
            c.close()
            continue
        held.append(c)          # keep it open, say nothing
        accepted += 1
        open(count_file, "w").write(str(accepted))
PY
xpid=$!
cleanup_x() {
	kill "$xpid" 2>/dev/null
	wait "$xpid" 2>/dev/null
	[ -f "$WORK/x.ready.file" ] && rm -f "$(cat "$WORK/x.ready.file")"
	[ -f "$WORK/x.ready.dir" ] && rmdir /tmp/.X11-unix 2>/dev/null
}
trap 'cleanup_x; _spank_cleanup' EXIT
for _ in $(seq 1 600); do [ -f "$WORK/x.ready" ] && break; sleep 0.1; done
[ -f "$WORK/x.ready" ] || fail "the fake X listener did not start"

# The live topology (no topology=), with binding: the code path that loads
# hwloc with I/O discovery in slurmstepd.  A step normally takes ~1 s.
cluster_plugstack ""
start=$(date +%s)
out=$(timeout 120 srun -N2 -n2 --dl-job=env --dl-bind=closest,verbose true 2>&1)
rc=$?
took=$(( $(date +%s) - start ))
# (A step stalled by the listener never ends: it waits for a reply that
# never comes, so timeout's 124 is the proof, not a time bound that a
# loaded machine may pass.)
[ $rc -eq 0 ] || fail "srun --dl-job=env with a silent X listener: rc=$rc after ${took}s: $out"
grep -q "^dljob: rank=0 .* bound=" <<<"$out" || fail "the live topology was not used: $out"
[ ! -s "$WORK/x.count" ] || fail "slurmstepd connected $(cat "$WORK/x.count") time(s) to the fake X display"
echo "ok   a silent X listener on the node: the step ran in ${took}s, no connection to it"
# The listener holds and counts only processes with this cluster's
# SLURM_CONF: a step's slurmstepd must have it, or the check above could
# not fail (a stalled slurmstepd would be let go at once).
srun -N1 -n1 sleep 30 >/dev/null 2>&1 &
spid=$!
found=
for _ in $(seq 1 600); do
	for p in $(pgrep -f '^slurmstepd'); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF" && found=$p && break 2
	done
	sleep 0.1
done
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
[ -n "$found" ] || fail "no slurmstepd of this cluster has SLURM_CONF=$SLURM_CONF in its environment: the listener would count none"
echo "ok   this cluster's slurmstepd carries SLURM_CONF (pid $found): the listener's count covers it"
nodes_idle
