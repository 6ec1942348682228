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
# abstract socket and, where /tmp/.X11-unix lets us, the file socket; it
# counts the connections it accepted and never writes a byte.
"$py" - "$WORK/x.count" "$WORK/x.ready" <<'PY' &
import os, socket, sys, select
count_file, ready_file = sys.argv[1], sys.argv[2]
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
for _ in $(seq 1 100); do [ -f "$WORK/x.ready" ] && break; sleep 0.1; done
[ -f "$WORK/x.ready" ] || fail "the fake X listener did not start"

# The live topology (no topology=), with binding: the code path that loads
# hwloc with I/O discovery in slurmstepd.  A step normally takes ~1 s.
cluster_plugstack ""
start=$(date +%s)
out=$(timeout 60 srun -N2 -n2 --dl-job=env --dl-bind=closest,verbose true 2>&1)
rc=$?
took=$(( $(date +%s) - start ))
[ $rc -eq 0 ] || fail "srun --dl-job=env with a silent X listener: rc=$rc after ${took}s: $out"
[ $took -le 15 ] || fail "srun --dl-job=env took ${took}s with a silent X listener on the node"
grep -q "^dljob: rank=0 .* bound=" <<<"$out" || fail "the live topology was not used: $out"
[ ! -s "$WORK/x.count" ] || fail "slurmstepd connected $(cat "$WORK/x.count") time(s) to the fake X display"
echo "ok   a silent X listener on the node: the step ran in ${took}s, no connection to it"
nodes_idle
