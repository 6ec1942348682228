#!/bin/bash
# The cgroup v2 test node's image for make check-cgroup2, made once and
# cached: a Debian 12 root file system (debootstrap from the mirror) with
# systemd as init, munge, slurmctld, slurmd, slurm-client, Debian's kernel
# and the runtime libraries of dljob's .debs, as a raw ext4 image
# (mke2fs -d), with the kernel and its initramfs beside it.
#
#   tests/cgroup2/mkimage.sh CACHE_DIR EXTRA_PACKAGES...
#
# Writes CACHE_DIR/<key>/{root.img,vmlinuz,initrd.img} and prints that
# directory; key: a hash of this script, the guest unit and the package
# list, so a changed list or script makes a new image (old ones are left
# for the admin to delete).  Needs root, debootstrap, e2fsprogs and the
# Debian mirror (http://deb.debian.org/debian unless DLJOB_MIRROR).
set -euo pipefail
cache=${1:?usage: mkimage.sh CACHE_DIR EXTRA_PACKAGES...}
shift
here=$(cd "$(dirname "$0")" && pwd)
mirror=${DLJOB_MIRROR:-http://deb.debian.org/debian}
# Packages of the node: systemd as PID 1 (with dbus: Slurm's cgroup/v2
# asks systemd over D-Bus for slurmstepd's scope), the Slurm daemons and
# client, munge, Debian's kernel, and what the tests run.
base="systemd systemd-sysv dbus udev kmod linux-image-amd64 initramfs-tools
 munge slurmd slurmctld slurm-client slurm-wlm-basic-plugins hwloc procps
 iproute2 util-linux"
pkgs=$(echo $base "$@" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
key=$( { cat "$0" "$here/dljob-cgroup2.service"; echo "$pkgs"; } | sha256sum | cut -c1-16)
out=$cache/$key
if [ -f "$out/done" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache"
exec 8>"$cache/lock"
flock -w 1800 8 || { echo "mkimage: $cache/lock held for 30 min" >&2; exit 1; }
[ -f "$out/done" ] && { echo "$out"; exit 0; }
rm -rf "$out"
mkdir -p "$out"
root=$out/root
echo "mkimage: debootstrap bookworm into $root ($(date +%T))" >&2
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$root" "$mirror" \
	>"$out/debootstrap.log" 2>&1 || { tail -30 "$out/debootstrap.log" >&2; exit 1; }
cat >"$root/etc/apt/sources.list" <<EOS
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${DLJOB_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
EOS
# No daemon starts in the chroot; the test script starts them in the VM.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
# A small initramfs: only what mounts a virtio disk's ext4.
mkdir -p "$root/etc/initramfs-tools/conf.d"
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/dljob.conf"
printf '%s\n' virtio_pci virtio_blk ext4 >>"$root/etc/initramfs-tools/modules"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
echo "mkimage: apt-get install $pkgs ($(date +%T))" >&2
# shellcheck disable=SC2086
if ! chroot "$root" sh -c "export DEBIAN_FRONTEND=noninteractive; apt-get -q update &&
	apt-get -q -y upgrade && apt-get -q -y install --no-install-recommends $pkgs && apt-get clean" \
	>"$out/apt.log" 2>&1; then
	tail -30 "$out/apt.log" >&2
	exit 1
fi
umount "$root/proc"
trap - EXIT
rm -f "$root/usr/sbin/policy-rc.d"
# The daemons are started by the test, with its configuration.
for u in munge slurmd slurmctld apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
	chroot "$root" systemctl disable "$u" >/dev/null 2>&1 || true
done
# Nobody logs in: no getty on the console (a quicker boot under TCG).
chroot "$root" systemctl mask serial-getty@ttyS0.service getty@tty1.service e2scrub_reap.service >/dev/null 2>&1
echo cg2 >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 cg2\n' >"$root/etc/hosts"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$root/etc/fstab"
install -m 644 "$here/dljob-cgroup2.service" "$root/etc/systemd/system/dljob-cgroup2.service"
chroot "$root" systemctl enable dljob-cgroup2.service >/dev/null 2>&1
mkdir -p "$root/mnt/host"
cp -L "$root/vmlinuz" "$out/vmlinuz"
cp -L "$root/initrd.img" "$out/initrd.img"
echo "mkimage: mke2fs -d ($(date +%T))" >&2
mke2fs -q -t ext4 -d "$root" -L dljob-cg2 "$out/root.img" 3G >&2
rm -rf "$root"
echo "$pkgs" >"$out/packages"
touch "$out/done"
echo "mkimage: done ($(date +%T))" >&2
echo "$out"
