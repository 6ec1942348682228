#!/bin/bash
# configure --disable-runtime: the SPANK plugin alone, as a slurmd node's
# package build has it.  In a scratch build directory: configure must not
# look for any of the runtime's dependencies (PMIx, libsodium, jansson,
# Open MPI, oneDNN, libjpeg/libpng/zlib, protobuf-c, cairo, CUDA), make
# builds the plugin's sources only, and make install puts exactly the
# plugin, its libtool archive, its plugstack.conf.d snippet and
# spank-dljob(8) into DESTDIR; dljob.so needs no library but libc, libm
# and hwloc's.  About 30 s (configure, then ten files compiled).
set -u
src=${DLJOB_SRCDIR:?run under make check}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
work=$(mktemp -d /tmp/dljob-pluginonly.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
mkdir build && cd build || exit 1

# The plugin directory inside the prefix, so that DESTDIR holds all of it.
if ! "$src/configure" -q --disable-runtime --enable-werror --prefix=/usr --sysconfdir=/etc \
	--with-slurm-plugindir=/usr/lib/slurm >configure.out 2>&1; then
	cat configure.out; echo "FAIL: configure --disable-runtime"; exit 1
fi
echo "ok: configure --disable-runtime"
# What configure looked for: none of the runtime's dependencies.
looked=$(grep -E '^configure:[0-9]+: checking' config.log |
	grep -iwE 'pmix|pmix\.h|libsodium|jansson|mpicc|mpi\.h|dnnl|jpeglib\.h|jpeg|libpng|zlib|libprotobuf-c|protoc-c|protoc|cairo|nvcc')
[ -z "$looked" ] || fail "configure --disable-runtime looked for the runtime's dependencies:
$looked"
grep -q '^BUILD_RUNTIME_TRUE=.#' config.log || fail "config.log: BUILD_RUNTIME is not false"

if ! make -j2 >make.out 2>&1; then
	tail -30 make.out; echo "FAIL: make"; exit 1
fi
# Only the plugin's sources were compiled (spank/, common/, mapping/).
compiled=$(grep -oE '[-]c [^ ]*\.c( |$)' make.out | sed 's/^-c //; s/ $//' | sort -u)
grep -q 'spank/plugin\.c$' <<<"$compiled" || fail "make.out shows no compile of spank/plugin.c: $compiled"
other=$(grep -vE '(spank|common|mapping)/[a-z_]+\.c$' <<<"$compiled")
[ -z "$other" ] || fail "make compiled more than the plugin:
$other"
[ -e dljob ] && fail "make built the runtime dljob"
echo "ok: make built the plugin"

if ! make install DESTDIR="$work/root" >install.out 2>&1; then
	tail -30 install.out; echo "FAIL: make install"; exit 1
fi
want='/etc/slurm/plugstack.conf.d/dljob.conf
/usr/lib/slurm/dljob.la
/usr/lib/slurm/dljob.so
/usr/share/man/man8/spank-dljob.8'
got=$(cd "$work/root" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort)
if [ "$got" != "$want" ]; then
	fail "make install put other files into DESTDIR:"; diff <(echo "$want") <(echo "$got") | sed 's/^/    /'
else
	echo "ok: make install: the plugin, its snippet and spank-dljob(8) only"
fi

so=$work/root/usr/lib/slurm/dljob.so
if [ -f "$so" ]; then
	needed=$(readelf -dW "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort)
	bad=$(grep -vE '^(libc\.so\.[0-9]+|libm\.so\.[0-9]+|libhwloc\.so\.[0-9]+)$' <<<"$needed")
	[ -n "$needed" ] || fail "readelf -d $so: no NEEDED entries"
	[ -z "$bad" ] || fail "dljob.so needs more than libc, libm, libhwloc: $(echo $bad)"
	[ -n "$needed" ] && [ -z "$bad" ] && echo "ok: dljob.so needs $(echo $needed)"
fi
[ $fails -eq 0 ] || exit 1
echo "ok: the plugin builds and installs alone"
