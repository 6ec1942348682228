#!/bin/sh
# Install every Debian 12 package dljob's build and test suite need.
# Idempotent: apt-get skips what is already installed. Run as root.
set -eu

PKGS_BUILD="build-essential autoconf automake libtool pkg-config
  libslurm-dev slurm-wlm-plugins-dev libhwloc-dev hwloc libpmix-dev libsodium-dev
  openmpi-bin libopenmpi-dev libdnnl-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
  libjansson-dev libprotobuf-c-dev protobuf-c-compiler libcairo2-dev"
PKGS_TEST="slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins
  dataset-fashion-mnist python3-torch python3-torchvision python3-numpy python3-pil
  libjpeg-turbo-progs imagemagick python3-skimage python3-sklearn iproute2 util-linux
  protobuf-compiler python3-protobuf fonts-dejavu-core e2fsprogs"
# make check-asan: clang with the ASan/UBSan/libFuzzer runtimes, OpenMP for clang
PKGS_ASAN="clang libclang-rt-14-dev libomp-dev"
# make check-packages: dpkg-buildpackage (debhelper), lintian, rpmbuild (rpm), unpacking
# an RPM (rpm2cpio, cpio), rendering the installed man pages (man-db)
PKGS_PACKAGES="dpkg-dev debhelper fakeroot lintian rpm rpm2cpio cpio man-db"
# make check-slurm-current: Slurm 24.11 built from Debian's source tarball
PKGS_SLURM_CURRENT="curl libmunge-dev"
# make install-relocatable (tests/test_relocatable.sh)
PKGS_RELOC="patchelf"
# make check-cgroup2: a Debian VM under qemu's TCG, its root file system
# made with debootstrap (tests/cgroup2/)
PKGS_CGROUP2="qemu-system-x86 debootstrap"

APT="apt-get -o DPkg::Lock::Timeout=600 -y -q"
export DEBIAN_FRONTEND=noninteractive

missing=""
for p in $PKGS_BUILD $PKGS_TEST $PKGS_ASAN $PKGS_PACKAGES $PKGS_SLURM_CURRENT $PKGS_RELOC $PKGS_CGROUP2; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
	exit 0
fi
echo "install-deps: installing$missing"
$APT update
# shellcheck disable=SC2086
$APT install --no-install-recommends $missing
