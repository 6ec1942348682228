#!/bin/bash
# make install-relocatable: the runtime with its non-glibc libraries in
# PREFIX/lib/dljob (RUNPATH $ORIGIN/../lib/dljob) runs in a root file
# system that has nothing but glibc (an image that lacks oneDNN, libjpeg,
# PMIx, Open MPI, libsodium...): `dljob --version` and one training step on
# synthetic data, under chroot(8) with /proc.  The CUDA toolkit's libraries are not
# bundled (GPU images provide them): when the build uses them, the host's
# toolkit is bind-mounted into that root, in a private mount namespace, and
# put on LD_LIBRARY_PATH (as a GPU image has it on its loader's path).
# Needs root (chroot).
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "FAIL - needs root (chroot)"; exit 1; }
work=$(mktemp -d /tmp/dljob-reloc.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
root=$work/root
make -s -C "$DLJOB_BUILDDIR" install-relocatable DESTDIR="$root" prefix=/opt/dljob >"$work/install.log" 2>&1
check "make install-relocatable" test -x "$root/opt/dljob/bin/dljob"
[ -x "$root/opt/dljob/bin/dljob" ] || { cat "$work/install.log"; finish; }
check "libdnnl is bundled beside the runtime" test -f "$root/opt/dljob/lib/dljob/libdnnl.so.2"

# glibc only: the loader and the libraries make install-relocatable leaves out.
bin=$root/opt/dljob/bin/dljob
mkdir -p "$root/tmp" "$root/proc" "$root/dev" || exit 1
cuda=
for lib in $(ldd "$DLJOB_BUILDDIR/dljob" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
	case "${lib##*/}" in
	libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|libresolv.so.*|ld-linux*)
		mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib" || exit 1 ;;
	esac
	case "$lib" in /usr/local/cuda*) cuda=$(dirname "$lib") ;; esac
done
# In a private mount namespace: /proc (as a container has it: the loader
# finds $ORIGIN through /proc/self/exe) and the CUDA toolkit if needed.
[ -z "$cuda" ] || mkdir -p "$root$cuda" || exit 1
run_in_root() {
	cuda=$cuda unshare -m sh -c 'mount --make-rprivate / && mount --rbind /proc "$2/proc" &&
		{ [ -z "$1" ] || mount --bind "$1" "$2$1"; } && shift 1 &&
		{ [ -z "$cuda" ] || export LD_LIBRARY_PATH="$cuda"; } && exec chroot "$@"' sh "$cuda" "$root" "$@"
}
out=$(run_in_root /opt/dljob/bin/dljob --version 2>&1)
check "dljob --version in a root with glibc only: $out" grep -q '^dljob ' <<<"$out"
out=$(run_in_root /opt/dljob/bin/dljob --model resnet20 --data synthetic:1,8,8,4,64 --backend ref --batch 4 \
	--steps 1 --eval 0 --threads 1 --out /tmp/out 2>&1)
check "one training step in a root with glibc only" test -s "$root/tmp/out/model.safetensors"
[ -s "$root/tmp/out/model.safetensors" ] || echo "$out" | tail -5
# The same root without the bundle: the runtime cannot even start, so the
# check above is the bundle's doing.
mv "$root/opt/dljob/lib/dljob" "$root/opt/dljob/lib/dljob.off" || exit 1
out=$(run_in_root /opt/dljob/bin/dljob --version 2>&1)
check "without the bundle the same root lacks libraries" grep -q 'error while loading shared libraries' <<<"$out"
finish
