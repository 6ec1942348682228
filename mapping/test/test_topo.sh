#!/bin/bash
# dljob topo: the explain mode of the mapping (the plugin's own code linked
# into the runtime).  Prints the table, with the rule behind each column,
# for an XML topology or this machine; runs nothing; bad arguments are one
# line and exit 2, a topology that does not load exit 1 naming the file.
set -u
: "${DLJOB_BIN:?run under make check}" "${DLJOB_SRCDIR:?run under make check}"
fail() { echo "FAIL: $*" >&2; exit 1; }
R=$DLJOB_SRCDIR/mapping/test/topologies/real
T=$DLJOB_SRCDIR/mapping/test/topologies

out=$("$DLJOB_BIN" topo --xml "$R/eas-tioga.xml" --tasks 8) || fail "dljob topo on eas-tioga.xml: $out"
[ "$(head -1 <<<"$out")" = "dljob: mapping of 8 tasks, step GPUs 0-7, topology $R/eas-tioga.xml" ] || fail "title: $out"
[ "$(sed -n 2p <<<"$out")" = "dljob: task  gpu  busid         hca  ifname  numa  cpus" ] || fail "header: $out"
[ "$(grep -c '^dljob: [0-7] ' <<<"$out")" = 8 ] && [ "$(grep -c '^dljob: *why: ' <<<"$out")" = 8 ] || fail "rows: $out"
grep -qx "dljob: 0     0    0000:c1:00.0  -    hsi0    3     48-55,112-119" <<<"$out" || fail "task 0: $out"
grep -qx "dljob: 5     5    0000:d6:00.0  -    hsi2    0     8-15,72-79" <<<"$out" || fail "task 5: $out"
grep -q "^dljob: *why: gpu: task 0 mod 8 step GPUs; hca: no OpenFabrics device on the node; ifname: nearest high-speed: same Group, split: 2 GPUs over 1; numa: of the GPU's L3Cache P#6; cpus: L3Cache P#6: 8 cores$" <<<"$out" ||
	fail "task 0's rules: $out"
echo "ok   dljob topo --xml eas-tioga.xml --tasks 8: every GPU of the file, the table and its rules"

out=$("$DLJOB_BIN" topo --xml "$T/no-nic.xml" --tasks 8 --gpus none) || fail "--gpus none: $out"
[ "$(grep -c '(shared by 2 tasks)$' <<<"$out")" = 8 ] || fail "8 tasks on 4 cores must say they share: $out"
echo "ok   more tasks than cores: the table says the cores are shared"

out=$("$DLJOB_BIN" topo --xml "$T/shared-nic.xml" --tasks 2 --gpus 1,3 --nic none) || fail "--nic none: $out"
grep -q "^dljob: 1 .* 0000:15:00.0  -    -       0     2-3$" <<<"$out" && grep -q "hca: not chosen (nic=none)" <<<"$out" ||
	fail "--nic none: $out"
echo "ok   --gpus 1,3 --nic none"

# Within a CPU list (the step's CPUs on a shared node): every task's CPUs
# lie in it, disjoint, the GPU's own L3 first.
out=$("$DLJOB_BIN" topo --xml "$R/eas-tioga.xml" --tasks 2 --gpus 0 --cpus 52-59,116-123) || fail "--cpus: $out"
[ "$(head -1 <<<"$out")" = "dljob: mapping of 2 tasks, step GPUs 0, topology $R/eas-tioga.xml, within CPUs 52-59,116-123" ] ||
	fail "--cpus title: $out"
grep -q "^dljob: 0 .*  52-53,56-57,116-117,120-121$" <<<"$out" && grep -q "^dljob: 1 .*  54-55,58-59,118-119,122-123$" <<<"$out" &&
	grep -q "cpus: L3Cache P#6 split 2 ways: 2 cores + rest of NUMA 3 split 2 ways: 2 cores$" <<<"$out" || fail "--cpus rows: $out"
out=$("$DLJOB_BIN" topo --xml "$T/2s-8gpu-4hca.xml" --tasks 4 --gpus 0-3 --cpus 4-7) || fail "--cpus far socket: $out"
[ "$(grep -c '^dljob: [0-3] .*  0     [4-7]$' <<<"$out")" = 4 ] && [ "$(grep -o '  [4-7]$' <<<"$out" | sort -u | wc -l)" = 4 ] ||
	fail "--cpus 4-7 with the GPUs on socket 0: each task one of the step's cores: $out"
echo "ok   dljob topo --cpus: the plan within the step's CPUs (L3 half, far socket)"

# This machine's own topology.
out=$("$DLJOB_BIN" topo --tasks 1) || fail "dljob topo on this machine: $out"
grep -q "^dljob: mapping of 1 task, step GPUs .*, topology of this machine$" <<<"$out" || fail "live: $out"
echo "ok   dljob topo --tasks 1 on this machine"

# err WANT_RC WANT_TEXT ARGS...: one line on stderr, that status.
err() {
	local rc=$1 want=$2 out got
	shift 2
	out=$("$DLJOB_BIN" topo "$@" 2>&1 >/dev/null)
	got=$?
	[ "$got" = "$rc" ] || fail "dljob topo $*: exit $got, expected $rc ($out)"
	[ "$(wc -l <<<"$out")" = 1 ] && grep -qF -- "$want" <<<"$out" || fail "dljob topo $*: expected '$want': $out"
	echo "ok   dljob topo $* -> $rc: $out"
}
err 2 "dljob topo: --tasks N is required" --xml "$T/no-nic.xml"
err 2 "--tasks: 0 is out of range" --tasks 0
err 2 "--tasks: 'x' is not an integer" --tasks x
err 2 "--gpus=1-x: expected Slurm GPU indexes" --tasks 1 --gpus 1-x
err 2 "--nic=far: expected closest or none" --tasks 1 --nic far
err 2 "--cpus=1-x: expected CPU numbers such as 0-15,64-79" --tasks 1 --cpus 1-x
err 1 "dljob topo: none of the CPUs 500 is in the topology (its CPUs: 0-3)" --xml "$T/no-nic.xml" --tasks 1 --cpus 500
err 2 "dljob topo: unknown option '--bogus' (see dljob topo --help)" --tasks 1 --bogus
err 2 "dljob topo: option '--tasks' needs a value" --tasks
err 2 "unexpected argument 'extra'" --tasks 1 extra
err 1 "dljob topo: $T/missing.xml: No such file or directory" --xml "$T/missing.xml" --tasks 1
err 1 "dljob topo: $T: not a regular file" --xml "$T" --tasks 1
err 1 "GPU 9 of the step is not in the topology (it has 8 GPUs)" --xml "$R/eas-tioga.xml" --tasks 1 --gpus 9
"$DLJOB_BIN" topo --help | grep -q "^Usage: dljob topo" || fail "dljob topo --help"
"$DLJOB_BIN" --help | grep -q "dljob topo --tasks N" || fail "dljob --help does not list topo"
echo "ok   dljob topo --help, and dljob --help lists it"
