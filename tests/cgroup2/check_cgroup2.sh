#!/bin/bash
# make check-cgroup2: dljob on a pure cgroup v2 node.  Builds the project's
# .debs from the make dist tarball (as check-packages does), makes or reuses
# the cached Debian 12 node image (tests/cgroup2/mkimage.sh: debootstrap,
# systemd, munge, slurmctld, slurmd, Debian's kernel), boots it under
# qemu's TCG (no KVM: a guest kernel hangs under this machine's nesting)
# with the image read-only (snapshot=on) and the .debs, the test script and
# a topology file on a virtio-9p share; inside, tests/cgroup2/guest.sh
# installs the .debs, starts a one-node cluster with task/cgroup on
# cgroup/v2 and runs the checks, then the VM powers off.
#
#   tests/cgroup2/check_cgroup2.sh TARBALL RESULT_FILE
#
# Needs root, qemu-system-x86, debootstrap, e2fsprogs, dpkg-dev, debhelper,
# fakeroot (contrib/install-deps.sh) and, the first time, the Debian mirror.
# Cache: /var/cache/dljob/cgroup2 (DLJOB_CGROUP2_CACHE).  Ends with
# 'check-cgroup2: N passed, N failed' and writes "N N" to RESULT_FILE.
set -u
tarball=${1:?usage: check_cgroup2.sh TARBALL RESULT_FILE}
result=${2:?usage: check_cgroup2.sh TARBALL RESULT_FILE}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=${DLJOB_CGROUP2_CACHE:-/var/cache/dljob/cgroup2}

pass=0 failed=0 work=
ok()   { pass=$((pass + 1)); echo "ok   - $*"; }
fail() { failed=$((failed + 1)); echo "FAIL - $*"; }
step() { echo "=== check-cgroup2: $* ($(date +%T))"; }
report() {
	echo "$pass $failed" >"$result"
	echo "check-cgroup2: $pass passed, $failed failed"
}
cleanup() {
	[ -n "$work" ] && [ -z "${CHECK_CGROUP2_KEEP-}" ] && rm -rf "$work"
	[ -n "$work" ] && [ -n "${CHECK_CGROUP2_KEEP-}" ] && echo "kept $work"
	report
	[ $failed -eq 0 ]
	exit $?
}
stop() { fail "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || { fail "must run as root (debootstrap, chroot)"; report; exit 1; }
for c in qemu-system-x86_64 debootstrap mke2fs dpkg-buildpackage dh fakeroot; do
	command -v "$c" >/dev/null || { fail "missing $c: run contrib/install-deps.sh"; report; exit 1; }
done
[ -f "$tarball" ] || { fail "no tarball $tarball"; report; exit 1; }
t_start=$(date +%s)
work=$(mktemp -d /tmp/dljob-cgroup2.XXXXXX) || { fail "mktemp"; report; exit 1; }
trap cleanup EXIT
cd "$work" || stop "cd $work"

step "dpkg-buildpackage -b from $(basename "$tarball")"
tar xzf "$tarball" || stop "cannot unpack $tarball"
d=$(basename "$tarball" .tar.gz)
if ! (cd "$d" && dpkg-buildpackage -us -uc -b -j2) >deb-build.log 2>&1; then
	tail -40 deb-build.log
	stop "dpkg-buildpackage failed"
fi
mkdir -p share/debs
mv dljob_*.deb slurm-spank-dljob_*.deb share/debs/ 2>/dev/null
[ "$(ls share/debs | wc -l)" -eq 2 ] || stop "dpkg-buildpackage did not make the two .debs: $(ls)"
ok "built $(ls share/debs | tr '\n' ' ')"

# The node needs the .debs' dependencies (its dpkg -i has no network):
# their Depends, first of each alternative, without the two packages
# themselves.  Part of the image's key, so a new library makes a new image.
deps=$(for f in share/debs/*.deb; do dpkg-deb -f "$f" Depends; done | tr ',' '\n' |
	sed 's/|.*//; s/(.*)//; s/:any//; s/[[:space:]]//g' | grep -v -x -e '' -e dljob -e slurm-spank-dljob | sort -u)
step "node image (debootstrap once, cached in $cache)"
t0=$(date +%s)
# shellcheck disable=SC2086
img=$(bash "$here/mkimage.sh" "$cache" $deps) || stop "tests/cgroup2/mkimage.sh failed"
ok "node image $img ($(( $(date +%s) - t0 )) s)"

install -m 755 "$here/guest.sh" share/guest.sh
cp "$src/mapping/test/topologies/2s-8gpu-4hca.xml" share/ || stop "no topology file"
step "boot the node: qemu-system-x86_64 -accel tcg -smp 2 -m 2G"
t0=$(date +%s)
timeout 840 qemu-system-x86_64 -accel tcg -smp 2 -m 2G -display none -monitor none -no-reboot \
	-serial file:console.log -nic none \
	-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
	-append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 panic=-1" \
	-drive "file=$img/root.img,format=raw,if=virtio,snapshot=on" \
	-virtfs "local,path=$work/share,mount_tag=host,security_model=passthrough,id=host" \
	</dev/null >qemu.log 2>&1
qrc=$?
t_vm=$(( $(date +%s) - t0 ))
[ $qrc -eq 0 ] || fail "qemu exited $qrc after $t_vm s (124: timed out): $(tail -5 qemu.log)"
if [ -f share/results.txt ]; then
	while IFS= read -r l; do
		case $l in
		"ok   - "*) ok "${l#ok   - }" ;;
		"FAIL - "*) fail "${l#FAIL - }" ;;
		esac
	done <share/results.txt
fi
if ! grep -q -x DONE share/results.txt 2>/dev/null; then
	fail "the node's tests did not run through"
	echo "--- console (last 40 lines)"; tail -40 console.log
	echo "--- guest.log (last 40 lines)"; tail -40 share/guest.log 2>/dev/null
fi
if [ $failed -gt 0 ] && [ -f share/logs/slurmd.log ]; then
	echo "--- slurmd.log (last 30 lines)"; tail -30 share/logs/slurmd.log
fi
echo "check-cgroup2: VM ran $t_vm s ($(cat share/boot.txt 2>/dev/null || echo 'no boot time')), whole run $(( $(date +%s) - t_start )) s"
