#!/bin/bash
# Build a current Slurm release from Debian's source tarball into a cache
# outside the clone, for make check-slurm-current (tests/current/local.mk).
#
#     tests/current/build-slurm.sh [CACHE]     # prints the install prefix
#
# The source is Debian's orig tarball of slurm-wlm (the upstream release,
# from the Debian mirror, checked against its sha256 below).  The release is
# SLURM_VERSION's default below, or DLJOB_SLURM_VERSION: one of the releases
# whose checksum is listed.  26.05.5 is listed (Debian unstable's Sources
# index) but its tarball is not on the mirror this project reaches (404), so
# the default is still 24.11.5.  DLJOB_SLURM_TARBALL=FILE builds a release
# from an upstream tarball at hand instead (DLJOB_SLURM_VERSION names its
# version; no checksum: whoever names the file vouches for it).  It is built
# with --enable-multiple-slurmd (the test cluster runs two slurmd on one
# host), munge and Debian's PMIx, into CACHE/slurm-VERSION (default
# /var/cache/dljob).  A finished build leaves CACHE/slurm-VERSION/.dljob-built
# and is reused as is; an unfinished one is removed and built again.
# Needs libmunge-dev, libpmix-dev, libhwloc-dev, curl (contrib/install-deps.sh).
set -euo pipefail

SLURM_VERSION=${DLJOB_SLURM_VERSION:-24.11.5}
# sha256 of each Debian orig tarball, from the Sources index of the Debian
# release that carries it (24.11.5: trixie; 26.05.5: unstable).
case $SLURM_VERSION in
24.11.5) SLURM_SHA256=e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332 ;;
26.05.5) SLURM_SHA256=42cc1177e14db84a0f1407ed1e01f7d0e5e12a3cb1a12da3ce00d63e17021bb3 ;;
*) [ -n "${DLJOB_SLURM_TARBALL:-}" ] ||
	{ echo "build-slurm: no checksum known for Slurm $SLURM_VERSION (known: 24.11.5 26.05.5)" >&2; exit 1; }
   SLURM_SHA256= ;;
esac
SLURM_TARBALL=slurm-wlm_$SLURM_VERSION.orig.tar.gz
SLURM_URL=http://deb.debian.org/debian/pool/main/s/slurm-wlm/$SLURM_TARBALL

# What configure is given besides --prefix and --with-pmix; a cached build
# made with other flags is built again.  No GPU libraries (the test cluster's
# GPUs are fake), no X11, HDF5, Kafka or REST daemon.
SLURM_FLAGS="--enable-multiple-slurmd --with-munge --without-nvml --without-rsmi --disable-x11 --without-hdf5 --without-rdkafka --disable-slurmrestd"

cache=${1:-${DLJOB_SLURM_CACHE:-/var/cache/dljob}}
prefix=$cache/slurm-$SLURM_VERSION
log() { echo "build-slurm: $*" >&2; }
built() { [ -f "$prefix/.dljob-built" ] && grep -qxF "flags: $SLURM_FLAGS" "$prefix/.dljob-built"; }

if built; then
	echo "$prefix"
	exit 0
fi
mkdir -p "$cache"
# One builder at a time per cache (parallel make targets, two checkouts).
exec 9>"$cache/.slurm-$SLURM_VERSION.lock"
flock 9
if built; then
	echo "$prefix"
	exit 0
fi

start=$(date +%s)
tarball=$cache/$SLURM_TARBALL
if [ -n "${DLJOB_SLURM_TARBALL:-}" ]; then
	tarball=$DLJOB_SLURM_TARBALL
	[ -f "$tarball" ] || { log "DLJOB_SLURM_TARBALL: no such file: $tarball"; exit 1; }
	log "building from $tarball (not checksum-verified)"
elif [ ! -f "$tarball" ] || ! echo "$SLURM_SHA256  $tarball" | sha256sum -c --quiet - 2>/dev/null; then
	log "downloading $SLURM_URL"
	rm -f "$tarball.part"
	curl -fsSL --retry 3 -o "$tarball.part" "$SLURM_URL" || { log "download failed: $SLURM_URL"; exit 1; }
	echo "$SLURM_SHA256  $tarball.part" | sha256sum -c --quiet - ||
		{ log "checksum mismatch for $SLURM_URL (want sha256 $SLURM_SHA256)"; rm -f "$tarball.part"; exit 1; }
	mv -f "$tarball.part" "$tarball"
fi

src=$cache/src-$SLURM_VERSION
rm -rf "$src" "$prefix"
mkdir -p "$src"
tar xzf "$tarball" -C "$src" --strip-components=1
pmix=
for d in /usr/lib/"$(gcc -print-multiarch)"/pmix2 /usr/lib/"$(gcc -print-multiarch)"/pmix; do
	[ -f "$d/include/pmix.h" ] && { pmix=$d; break; }
done
[ -n "$pmix" ] || { log "Debian's PMIx not found (install libpmix-dev)"; exit 1; }
cd "$src"
log "configuring Slurm $SLURM_VERSION (prefix $prefix, PMIx $pmix)"
# shellcheck disable=SC2086
./configure -q --prefix="$prefix" --sysconfdir="$prefix/etc" --with-pmix="$pmix" $SLURM_FLAGS \
	>"$cache/slurm-$SLURM_VERSION.configure.log" 2>&1 ||
	{ tail -30 "$cache/slurm-$SLURM_VERSION.configure.log" >&2; log "configure failed"; exit 1; }
grep -q '^#define MULTIPLE_SLURMD 1' config.h || { log "configure did not enable multiple-slurmd"; exit 1; }
log "building ($(nproc) jobs)"
if ! make -j"$(nproc)" >"$cache/slurm-$SLURM_VERSION.make.log" 2>&1 ||
   ! make install >>"$cache/slurm-$SLURM_VERSION.make.log" 2>&1; then
	tail -30 "$cache/slurm-$SLURM_VERSION.make.log" >&2
	log "build failed (log: $cache/slurm-$SLURM_VERSION.make.log)"
	exit 1
fi
[ -f "$prefix/lib/slurm/mpi_pmix.so" ] || { log "Slurm was built without PMIx (no mpi_pmix.so)"; exit 1; }
cd /
rm -rf "$src"
printf 'Slurm %s built in %d s\nflags: %s\n' "$SLURM_VERSION" $(( $(date +%s) - start )) "$SLURM_FLAGS" >"$prefix/.dljob-built"
log "$(head -1 "$prefix/.dljob-built")"
echo "$prefix"
