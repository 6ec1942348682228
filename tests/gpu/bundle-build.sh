#!/bin/bash
# Build dljob from the offline bundle (tests/gpu/bundle.sh) on a machine with
# a C compiler and CUDA but no package manager, no network and none of
# dljob's other build dependencies (issue 17, part 1).  This file is copied
# into the bundle; run it from there:
#
#   bash gpu-bundle/bundle-build.sh [OPTION]...
#
#   --cpu-only      build without CUDA (a machine without nvcc: the check here)
#   --work DIR      where the prefix, source and build go (default
#                   /tmp/dljob-bundle, or $DLJOB_BUNDLE_WORK); a second run
#                   with the same DIR reuses the unpacked prefix, and
#                   configures and builds afresh
#   --jobs N        make -j N (default: all CPUs)
#   --no-overlay    build the bundled source as it is (see "Overlay" below)
#   --smoke         after the build, train resnet20 for 3 steps on synthetic
#                   data on the CPU backend, then on the CUDA backend (the
#                   module dljob-cuda.so; without a GPU: its "no CUDA device")
#   --run [ARG]...  after the build, run tests/gpu/run.sh ARG... (from the
#                   checkout around the bundle) with env.sh's variables set
#   --probe-cuda    only find nvcc, cuDNN, cuBLAS(Lt), NCCL and the CUDA
#                   runtime, print them and make the CUDA view; build nothing
#   --unpack-only   only unpack the packages into the prefix (step 1)
#
# Steps, each logged with the time:
#  0. check that this machine's glibc is at least the one MANIFEST names, and
#     that gcc, tar, sed and awk are there (make: the bundle's where it is not)
#  1. unpack debs/*.deb into WORK/prefix with `dpkg-deb -x`, or `ar` + `tar`,
#     or python3 where neither is there (DLJOB_BUNDLE_UNPACK=dpkg|ar|python
#     forces one); never into /.  Absolute symbolic links are pointed back into
#     the prefix.  WORK/prefix/view/{include,lib} gathers the headers and the
#     libraries in one place for configure's --with-X=DIR.
#  2. the bundled pkgconf as WORK/bin/pkg-config (PKG_CONFIG_LIBDIR and
#     PKG_CONFIG_SYSROOT_DIR on the prefix: the system's .pc files are never
#     read) and WORK/mpi/bin/mpicc answering --showme:* from Open MPI's
#     ompi-c.pc in the prefix (Debian's own mpicc has /usr compiled in).
#  3. CUDA (unless --cpu-only): nvcc from $NVCC, PATH, $CUDA_HOME,
#     /usr/local/cuda or the nvidia wheels of python3 (nvidia/cu13/bin); each of
#     cudart, cuDNN, cuBLAS, cuBLASLt and NCCL from the first of: nvcc's
#     toolkit, $CUDA_HOME, /usr/local/cuda, /usr ($DLJOB_CUDA_ROOTS replaces
#     these two), the wheels' nvidia/* directories ($DLJOB_CUDA_SITE adds
#     site-packages directories to search) that holds both its header and
#     its library.  WORK/cuda/{include,lib64}
#     links them together (with the unversioned libX.so links that the
#     wheels lack) for --with-cuda.  Kernels: -gencode arch=compute_90,code=sm_90
#     ($NVCC_GENCODE overrides).
#  4. configure (its summary table shows the prefix paths), make dljob and
#     the whole tree, make check TESTS= (builds every test program, the GPU
#     ones included, runs none).  dljob runs from the prefix without
#     LD_LIBRARY_PATH: -Wl,--disable-new-dtags makes its search path an RPATH,
#     which also finds the libraries' own dependencies; Debian's libmpi and
#     libopen-rte carry a RUNPATH of /usr/lib/x86_64-linux-gnu/openmpi/lib
#     that overrides it for their dependencies, so those (Open MPI's
#     libopen-rte and libopen-pal, hwloc, libevent, zlib) are linked into dljob
#     directly (--no-as-needed) and are loaded before libmpi asks for them;
#     and the CUDA view's lib64 is added to the RPATH (configure's own
#     -rpath for CUDA sits in a convenience library's LIBADD, which libtool
#     drops).
#  5. record `ldd` of dljob and of the GPU test programs (a library not found
#     or oneDNN not from the prefix fails the build), cudnnGetVersion,
#     cudnnGetCudartVersion, ncclGetVersion, cublasLtGetVersion and the CUDA
#     runtime and driver versions, and `dljob --version`; write WORK/env.sh.
#
# Overlay: when the bundle sits in a checkout (gpu-bundle/ at its top, as the
# device tool's `carry` puts it), the checkout's *.c *.h *.cu *.cuh *.py *.sh
# files that differ from the bundled source, or are new, are copied over it
# first, so a fix made after bundling needs no new bundle.  If configure.ac,
# Makefile.am, a *.mk fragment or m4/ differ, the build stops: the bundle's
# configure is stale, run tests/gpu/bundle.sh again.
#
# Output: everything goes to $OUT/bundle-build.log (else WORK/out/), written as
# it happens; ldd.txt and versions.txt beside it.  Exit status 0 only if dljob
# (and, with CUDA, the GPU test programs) built and every check above passed.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=${DLJOB_BUNDLE_WORK:-/tmp/dljob-bundle}
jobs=$(nproc 2>/dev/null || echo 4)
cuda=yes overlay=yes smoke=no probe=no run=no unpack_only=no
run_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--cpu-only) cuda=no ;;
	--work) work=$2; shift ;;
	--jobs) jobs=$2; shift ;;
	--no-overlay) overlay=no ;;
	--smoke) smoke=yes ;;
	--probe-cuda) probe=yes ;;
	--unpack-only) unpack_only=yes ;;
	--run) run=yes; shift; run_args=("$@"); break ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "bundle-build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd)
out=${OUT:-$work/out}
mkdir -p "$out" || exit 1
log=$out/bundle-build.log

P=$work/prefix               # the unpacked packages
V=$P/view                    # include/ and lib/ of all of them, for --with-X=DIR
C=$work/cuda                 # the CUDA view, for --with-cuda=DIR
S=$work/src                  # the unpacked dist tarball
B=$work/build
t0=$(date +%s)
say() { echo "[$(date -u +%T) +$(( $(date +%s) - t0 ))s] bundle-build: $*"; }
fail() { say "FAILED: $*"; exit 1; }

# ---- 1. packages --------------------------------------------------------------------
unpack_python() {
	python3 - "$1" "$2" <<'PY'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
if data[:8] != b"!<arch>\n":
    sys.exit(deb + ": not an ar archive")
off = 8
while off + 60 <= len(data):
    hdr = data[off:off + 60]
    name = hdr[:16].decode().strip().rstrip("/")
    size = int(hdr[48:58].decode().strip())
    body = data[off + 60:off + 60 + size]
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as t:
            if hasattr(tarfile, "tar_filter"):
                t.extractall(dest, filter="tar")
            else:
                t.extractall(dest)
        sys.exit(0)
    off += 60 + size + (size & 1)
sys.exit(deb + ": no data.tar member")
PY
}
unpack_ar() {
	local m z
	m=$(ar t "$1" | grep '^data\.tar') || return 1
	case $m in
	*.xz) z=-J ;; *.gz) z=-z ;; *.bz2) z=-j ;; *.zst) z=--zstd ;; *) z= ;;
	esac
	ar p "$1" "$m" | tar -x $z -f - -C "$2"
}
unpack() {
	local how=${DLJOB_BUNDLE_UNPACK:-}
	if [ -z "$how" ]; then
		if command -v dpkg-deb >/dev/null; then how=dpkg
		elif command -v ar >/dev/null && command -v xz >/dev/null; then how=ar
		else how=python; fi
	fi
	case $how in
	dpkg) dpkg-deb -x "$1" "$2" ;;
	ar) unpack_ar "$1" "$2" ;;
	python) unpack_python "$1" "$2" ;;
	*) echo "DLJOB_BUNDLE_UNPACK=$how: dpkg, ar or python" >&2; return 1 ;;
	esac
}

prepare_prefix() {
	local debs d l t f stamp
	debs=$(ls "$here"/debs/*.deb 2>/dev/null) || fail "no $here/debs/*.deb: run tests/gpu/bundle.sh on the development machine"
	stamp=$(cd "$here" && ls -l debs | md5sum | cut -c1-32)
	if [ -f "$P/.stamp" ] && [ "$(cat "$P/.stamp")" = "$stamp" ]; then
		say "prefix $P already unpacked"
		return 0
	fi
	rm -rf "$P" && mkdir -p "$P" || fail "cannot make $P"
	say "unpacking $(echo "$debs" | wc -l) packages into $P (${DLJOB_BUNDLE_UNPACK:-auto})"
	for d in $debs; do
		unpack "$d" "$P" || fail "unpacking $d"
	done
	# absolute links (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) into the prefix
	find "$P" -type l -lname '/*' | while read -r l; do
		t=$(readlink "$l")
		ln -sfn "$P$t" "$l" || exit 1
	done || fail "relinking absolute links"
	mkdir -p "$V/lib" && ln -sfn "$P/usr/include" "$V/include" || exit 1
	for d in "$P/usr/lib/x86_64-linux-gnu" "$P/lib/x86_64-linux-gnu" \
		 "$P/usr/lib/x86_64-linux-gnu/openmpi/lib" "$P/usr/lib/x86_64-linux-gnu/pmix2/lib"; do
		[ -d "$d" ] || continue
		for f in "$d"/lib*.so*; do
			[ -e "$f" ] && [ ! -e "$V/lib/$(basename "$f")" ] && ln -s "$f" "$V/lib/"
		done
	done
	echo "$stamp" >"$P/.stamp"
	say "prefix ready: $(ls "$V/lib" | wc -l) libraries in $V/lib"
}

# the bundle's libraries are Debian 12's: they need its glibc or a newer one
check_glibc() {
	local need have
	need=$(sed -n 's/^needs: glibc >= //p' "$here/MANIFEST" 2>/dev/null)
	have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
	[ -n "$need" ] && [ -n "$have" ] || return 0
	[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" = "$need" ] ||
		fail "this machine's glibc is $have; the bundled libraries need $need or newer"
	say "glibc $have (the bundle needs >= $need)"
}

check_tools() {
	local t missing=""
	for t in gcc tar sed awk grep find; do command -v $t >/dev/null || missing="$missing $t"; done
	[ -z "$missing" ] || fail "missing on this machine:$missing"
}
# make: the machine's, else the bundle's (after step 1)
find_make() {
	make_prog=$(command -v make || true)
	[ -n "$make_prog" ] && "$make_prog" --version >/dev/null 2>&1 || make_prog=$P/usr/bin/make
	[ -x "$make_prog" ] || fail "no make on this machine and none in the bundle"
	if [ "$make_prog" = "$P/usr/bin/make" ]; then
		# configure's config.status runs `make` by name too
		mkdir -p "$work/bin" && ln -sfn "$make_prog" "$work/bin/make" || exit 1
		export PATH=$work/bin:$PATH
	fi
	say "make: $make_prog"
}

# ---- 2. pkg-config and mpicc ------------------------------------------------------------
write_tools() {
	mkdir -p "$work/bin" "$work/mpi/bin" || exit 1
	cat >"$work/bin/pkg-config" <<EOF
#!/bin/sh
# written by bundle-build.sh: the bundled pkgconf, reading the prefix's .pc files only
PKG_CONFIG_LIBDIR=$P/usr/lib/x86_64-linux-gnu/pkgconfig:$P/usr/share/pkgconfig:$P/usr/lib/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$P
PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
export PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_ALLOW_SYSTEM_CFLAGS PKG_CONFIG_ALLOW_SYSTEM_LIBS
unset PKG_CONFIG_PATH
LD_LIBRARY_PATH=$V/lib exec $P/usr/bin/pkgconf "\$@"
EOF
	cat >"$work/mpi/bin/mpicc" <<EOF
#!/bin/sh
# written by bundle-build.sh: Open MPI's wrapper compiler for the prefix, from ompi-c.pc
pc=$work/bin/pkg-config
case "\$1" in
--showme:compile) exec \$pc --cflags ompi-c ;;
--showme:link) exec \$pc --libs ompi-c ;;
--showme:version) echo "mpicc: Open MPI \$(\$pc --modversion ompi-c) (Language: C)" ;;
--showme) echo "\${CC:-cc} \$(\$pc --cflags ompi-c) \$(\$pc --libs ompi-c)" ;;
*) exec \${CC:-cc} \$(\$pc --cflags ompi-c) "\$@" \$(\$pc --libs ompi-c) ;;
esac
EOF
	chmod +x "$work/bin/pkg-config" "$work/mpi/bin/mpicc" || exit 1
	"$work/bin/pkg-config" --exists hwloc pmix ompi-c libpng zlib ||
		fail "the bundled pkg-config does not find hwloc, pmix, ompi-c, libpng and zlib in $P"
	say "pkg-config: hwloc $("$work/bin/pkg-config" --modversion hwloc), pmix $("$work/bin/pkg-config" --modversion pmix)," \
		"Open MPI $("$work/bin/pkg-config" --modversion ompi-c), libpng $("$work/bin/pkg-config" --modversion libpng)"
}

# ---- 3. CUDA ----------------------------------------------------------------------------
py=${TORCH_PYTHON:-python3}
sites() {
	echo ${DLJOB_CUDA_SITE:-}
	"$py" -c 'import site, sys
print(" ".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path[1:]))' 2>/dev/null
}
# the directories that may hold a component: nvcc's toolkit first
cuda_roots() {
	local s d
	[ -n "$nvcc" ] && echo "$(cd "$(dirname "$nvcc")/.." && pwd)"
	[ -n "${CUDA_HOME:-}" ] && echo "$CUDA_HOME"
	echo ${DLJOB_CUDA_ROOTS-/usr/local/cuda /usr}
	for s in $(sites); do
		for d in "$s"/nvidia/*/; do [ -d "$d" ] && echo "${d%/}"; done
	done
}
find_nvcc() {
	local s c
	nvcc=""
	# the first that runs
	for c in ${NVCC:-} $(command -v nvcc) ${CUDA_HOME:+$CUDA_HOME/bin/nvcc} \
		$(for s in ${DLJOB_CUDA_ROOTS-/usr/local/cuda}; do echo "$s/bin/nvcc"; done) \
		$(for s in $(sites); do echo "$s"/nvidia/cu*/bin/nvcc "$s"/nvidia/cuda_nvcc/bin/nvcc; done); do
		[ -x "$c" ] && "$c" --version >/dev/null 2>&1 && { nvcc=$c; return 0; }
	done
	return 1
}
# find_comp HEADER STEM: the first root with both; sets inc and lib
find_comp() {
	local h=$1 stem=$2 r i l f
	for r in $(cuda_roots | awk '!seen[$0]++'); do
		i="" l=""
		for f in "$r/include/$h" "$r/targets/x86_64-linux/include/$h" "$r/include/x86_64-linux-gnu/$h"; do
			[ -f "$f" ] && { i=$(dirname "$f"); break; }
		done
		[ -n "$i" ] || continue
		for f in "$r"/lib64/lib$stem.so "$r"/lib/lib$stem.so "$r"/lib/x86_64-linux-gnu/lib$stem.so \
			 "$r"/targets/x86_64-linux/lib/lib$stem.so "$r"/lib64/lib$stem.so.[0-9]* \
			 "$r"/lib/lib$stem.so.[0-9]* "$r"/lib/x86_64-linux-gnu/lib$stem.so.[0-9]*; do
			[ -e "$f" ] && { l=$f; break; }
		done
		[ -n "$l" ] && { inc=$i lib=$l; return 0; }
	done
	return 1
}
prepare_cuda() {
	local comp h stem e f libdirs="" incdirs=""
	find_nvcc || fail "no nvcc (looked at \$NVCC, PATH, \$CUDA_HOME, /usr/local/cuda and the nvidia wheels of $py); --cpu-only builds without CUDA"
	say "nvcc: $nvcc ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
	rm -rf "$C" && mkdir -p "$C/include" "$C/lib64" || exit 1
	for comp in cuda_runtime.h:cudart cudnn.h:cudnn cublas_v2.h:cublas cublasLt.h:cublasLt nccl.h:nccl; do
		h=${comp%%:*} stem=${comp##*:}
		find_comp "$h" "$stem" || fail "$h with lib$stem.so not found (searched: $(cuda_roots | tr '\n' ' '))"
		say "$stem: $inc/$h, $lib"
		case " $incdirs " in *" $inc "*) ;; *) incdirs="$incdirs $inc" ;; esac
		case " $libdirs " in *" ${lib%/*} "*) ;; *) libdirs="$libdirs ${lib%/*}" ;; esac
		# the unversioned link that -l needs (wheels ship only libX.so.N)
		[ -e "$C/lib64/lib$stem.so" ] || ln -s "$lib" "$C/lib64/lib$stem.so"
	done
	# the first directory that has a name wins: the runtime's headers before the wheels'
	for e in $incdirs; do
		for f in "$e"/*; do [ -e "$C/include/${f##*/}" ] || ln -s "$f" "$C/include/"; done
	done
	for e in $libdirs; do
		for f in "$e"/lib*.so*; do [ -e "$C/lib64/${f##*/}" ] || ln -s "$f" "$C/lib64/"; done
	done
	cuda_libdirs=$libdirs
}

# ---- overlay ----------------------------------------------------------------------------
overlay_tree() {
	local repo=$here/.. f n=0 stale=""
	[ "$overlay" = yes ] && [ -f "$repo/configure.ac" ] || return 0
	repo=$(cd "$repo" && pwd)
	for f in configure.ac Makefile.am $(cd "$S" && find . -name '*.mk' -o -path './m4/*.m4' | sed 's|^\./||'); do
		case $f in m4/libtool.m4|m4/lt*.m4) continue ;; esac   # libtoolize writes these
		[ -f "$repo/$f" ] && ! cmp -s "$repo/$f" "$S/$f" && stale="$stale $f"
	done
	[ -z "$stale" ] || fail "the checkout's$stale differ from the bundle's: its configure is stale; run tests/gpu/bundle.sh again (or --no-overlay)"
	while read -r f; do
		if [ ! -f "$S/$f" ] || ! cmp -s "$repo/$f" "$S/$f"; then
			mkdir -p "$(dirname "$S/$f")" && cp -p "$repo/$f" "$S/$f" || fail "copying $f"
			say "overlay: $f from $repo"
			n=$((n + 1))
		fi
	done < <(cd "$repo" && find engine runtime spank tests contrib -type f \
		\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.py' -o -name '*.sh' \) 2>/dev/null)
	say "overlay: $n file(s) from the checkout $repo"
}

# the libraries libmpi's RUNPATH would hide (step 4), by file name: the bundle
# has libevent's run-time package only, without the libevent_core.so link
preload_libs() {
	local stem f
	for stem in open-rte open-pal hwloc event_core event_pthreads z; do
		f=$(cd "$V/lib" && ls lib$stem.so.[0-9]* lib$stem-*.so.[0-9]* 2>/dev/null | head -1)
		[ -n "$f" ] || fail "lib$stem not in $V/lib"
		printf -- '-l:%s ' "$f"
	done
}

# ---- 4. configure and make ----------------------------------------------------------------
build() {
	local tarball conf
	tarball=$(ls "$here"/dljob-*.tar.gz 2>/dev/null | head -1)
	[ -n "$tarball" ] || fail "no dljob-*.tar.gz in $here"
	rm -rf "$S" "$B" && mkdir -p "$S" "$B" || exit 1
	tar -xzf "$tarball" -C "$S" --strip-components=1 || fail "unpacking $tarball"
	say "source: $(basename "$tarball")"
	overlay_tree
	conf=(--prefix="$work/install" --with-slurm-plugindir="$work/install/lib/slurm"
		--with-slurm="$V" --with-hwloc="$V" --with-dnnl="$V" --with-jpeg="$V"
		--with-pmix="$P/usr/lib/x86_64-linux-gnu/pmix2" --with-mpi="$work/mpi"
		PKG_CONFIG="$work/bin/pkg-config" TORCH_PYTHON="$py"
		LIBS="-Wl,--disable-new-dtags -Wl,--no-as-needed $(preload_libs)")
	# -L too: configure's first test links LIBS, before any --with-X is applied
	conf+=(LDFLAGS="-L$V/lib -Wl,-rpath,$V/lib${C:+ -Wl,-rpath,$C/lib64}")
	# Debian's multiarch headers (jconfig.h): gcc looks there for /usr/include only
	conf+=(CPPFLAGS="-I$V/include/x86_64-linux-gnu")
	# cairo.pc requires the -dev packages of X11, glib, freetype... that
	# cairo.h does not include: name its flags instead
	conf+=(CAIRO_CFLAGS="-I$V/include/cairo" CAIRO_LIBS="-lcairo")
	# on make's command line too: configure sets NVCC_GENCODE itself, over the
	# value it is given
	local mk=()
	if [ "$cuda" = yes ]; then
		mk=(NVCC_GENCODE="${NVCC_GENCODE:--gencode arch=compute_90,code=sm_90}")
		conf+=(--with-cuda="$C" NVCC="$nvcc" "${mk[@]}")
	else
		conf+=(--without-cuda)
	fi
	say "configure ${conf[*]}"
	(cd "$B" && "$S/configure" "${conf[@]}") || { tail -30 "$B/config.log"; fail "configure (config.log above)"; }
	say "make -j$jobs"
	"$make_prog" -C "$B" -j"$jobs" "${mk[@]}" || fail "make"
	say "make -j$jobs check TESTS= (builds the test programs, runs none)"
	"$make_prog" -C "$B" -j"$jobs" "${mk[@]}" check TESTS= || fail "building the test programs"
	if [ "$cuda" = yes ]; then
		# the kernels are built for the GPU asked for, and for nothing else
		local o cod
		cod=$(dirname "$nvcc")/cuobjdump
		[ -x "$cod" ] || cod=$(command -v cuobjdump || true)
		[ -n "$cod" ] || say "no cuobjdump: the kernels' targets are not listed"
		for o in ${cod:+"$B"/engine/cuda/.libs/k_*.o}; do
			say "$(basename "$o"): $("$cod" --list-elf "$o" 2>/dev/null | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort -u | tr '\n' ' ')" \
				"$("$cod" --list-ptx "$o" 2>/dev/null | grep -c ptx) PTX"
		done
	fi
}

# ---- 5. what was built ----------------------------------------------------------------------
record() {
	local p v bad=0
	: >"$out/ldd.txt"
	# the CUDA backend is a module dljob loads on demand (engine/backend.h)
	if [ "$cuda" = yes ] && [ ! -f "$B/engine/cuda/.libs/dljob-cuda.so" ]; then
		say "no CUDA backend module $B/engine/cuda/.libs/dljob-cuda.so"; bad=1
	fi
	for p in "$B/dljob" $(ls "$B"/engine/cuda/.libs/dljob-cuda.so "$B"/tests/gpu/* "$B"/tests/bench/* 2>/dev/null | while read -r f; do
			[ -x "$f" ] && [ -f "$f" ] && file_is_elf "$f" && echo "$f"; done); do
		{ echo "== ldd $p"; ldd "$p"; } >>"$out/ldd.txt" 2>&1
	done
	cat "$out/ldd.txt"
	grep -q "not found" "$out/ldd.txt" && { say "ldd: a library is not found"; bad=1; }
	# every library from the prefix or the CUDA view, but the C library's and the compiler's
	v=$(sed -n 's/^\s*\([^ ]*\) => \([^ ]*\) .*/\1 \2/p' "$out/ldd.txt" | sort -u |
		grep -vE "^lib(c|m|dl|rt|pthread|stdc\+\+|gcc_s|gomp)\.so\.[0-9]+ " | grep -vE " ($work|$V|${C:-$V})/")
	[ -z "$v" ] || { say "ldd: not from the prefix:" $v; bad=1; }
	readelf -d "$B/dljob" 2>/dev/null | grep -E 'RPATH|RUNPATH'
	v=$("$B/dljob" --version 2>&1) || bad=1
	say "dljob --version: $v"
	if [ "$cuda" = yes ]; then
		cat >"$work/versions.c" <<'EOF'
/* written by bundle-build.sh: the versions of the CUDA libraries dljob links */
#include <stdio.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublasLt.h>
#include <nccl.h>
int main(void)
{
	int rt = 0, drv = 0, nccl = 0;
	cudaError_t e1 = cudaRuntimeGetVersion(&rt), e2 = cudaDriverGetVersion(&drv);
	ncclResult_t e3 = ncclGetVersion(&nccl);
	printf("cudnnGetVersion %zu (header %d.%d.%d)\n", cudnnGetVersion(), CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
	printf("cudnnGetCudartVersion %zu\n", cudnnGetCudartVersion());
	printf("ncclGetVersion %d (%s; header %d)\n", nccl, ncclGetErrorString(e3), NCCL_VERSION_CODE);
	printf("cublasLtGetVersion %zu\n", cublasLtGetVersion());
	printf("cudaRuntimeGetVersion %d (%s)\n", rt, cudaGetErrorString(e1));
	printf("cudaDriverGetVersion %d (%s; 0: no driver)\n", drv, cudaGetErrorString(e2));
	return e1 != cudaSuccess || e3 != ncclSuccess;
}
EOF
		gcc -o "$work/versions" "$work/versions.c" -I"$C/include" -L"$C/lib64" -Wl,--disable-new-dtags \
			-Wl,-rpath,"$C/lib64" -lcudnn -lcublasLt -lnccl -lcudart || { say "cannot build versions.c"; bad=1; }
		"$work/versions" >"$out/versions.txt" 2>&1 || { say "versions: failed"; bad=1; }
		cat "$out/versions.txt"
		command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	fi
	return $bad
}
file_is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }

write_env() {
	cat >"$work/env.sh" <<EOF
# written by bundle-build.sh: source it to run what the bundle built
export DLJOB_BUNDLE_WORK=$work
export DLJOB_SRCDIR=$S DLJOB_BUILDDIR=$B DLJOB_BIN=$B/dljob
# where dljob finds the build's CUDA backend module (not installed: dljob(1))
export DLJOB_MODULE_DIR=$B/engine/cuda/.libs
export PATH=$B:\$PATH
export LD_LIBRARY_PATH=$V/lib${C:+:$C/lib64}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
EOF
	say "wrote $work/env.sh"
}

main() {
	say "bundle $here, work $work, log $log"
	[ -f "$here/MANIFEST" ] && sed -n '1,2p' "$here/MANIFEST"
	echo "host: $(uname -srm), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"), $(nproc) CPUs, gcc $(gcc -dumpversion 2>/dev/null || echo none)"
	nvcc=""
	if [ "$probe" = yes ]; then
		prepare_cuda
		ls -l "$C/lib64" "$C/include" | grep -E 'cudnn\.h|nccl\.h|cublasLt\.h|cuda_runtime\.h|lib(cudnn|nccl|cublasLt|cublas|cudart)\.so'
		return 0
	fi
	[ "$cuda" = yes ] || C=""
	check_glibc
	check_tools
	prepare_prefix
	[ "$unpack_only" = yes ] && return 0
	find_make
	write_tools
	[ "$cuda" = yes ] && prepare_cuda
	build
	record || fail "checks of the build (above)"
	write_env
	if [ "$smoke" = yes ]; then
		say "smoke: resnet20, 3 steps, synthetic data, cpu backend"
		rm -rf "$work/smoke"
		"$B/dljob" --backend cpu --model resnet20 --data synthetic:1,28,28,10,256 --batch 32 \
			--steps 3 --eval 0 --print-every 1 --out "$work/smoke" || fail "smoke run"
		if [ "$cuda" = yes ]; then
			# the module loads and its backend runs: trains on a GPU; without
			# one its create() says so (the self-test here)
			say "smoke: the same on --backend cuda (the module)"
			rm -rf "$work/smoke-cuda"
			if ! DLJOB_MODULE_DIR=$B/engine/cuda/.libs "$B/dljob" --backend cuda --model resnet20 \
				--data synthetic:1,28,28,10,256 --batch 32 --steps 3 --eval 0 --print-every 1 \
				--out "$work/smoke-cuda" 2>"$work/smoke-cuda.err"; then
				cat "$work/smoke-cuda.err"
				grep -q "no CUDA device is visible" "$work/smoke-cuda.err" || fail "smoke run on cuda"
				say "no GPU here: the module loaded and its backend said so"
			fi
		fi
	fi
	say "built: $B/dljob; source $work/env.sh to use it"
	if [ "$run" = yes ]; then
		[ -x "$here/../tests/gpu/run.sh" ] || [ -f "$here/../tests/gpu/run.sh" ] ||
			fail "--run: no tests/gpu/run.sh beside the bundle"
		say "running tests/gpu/run.sh ${run_args[*]}"
		# shellcheck disable=SC1091
		. "$work/env.sh"
		bash "$here/../tests/gpu/run.sh" "${run_args[@]}"
		return $?
	fi
}

main 2>&1 | tee -a "$log"
exit "${PIPESTATUS[0]}"
