#!/bin/bash
# Check the offline build bundle on the development machine as far as it can
# be checked without a GPU (issue 17, part 1): build dljob from the bundle
# with this machine's own copies of the bundled packages made unusable, so
# that a build or a run that reaches for any of them fails loudly.
#
#   tests/gpu/bundle-selftest.sh [--no-wheels] [BUNDLE [bundle-build.sh ARG...]]
#
# BUNDLE defaults to gpu-bundle/ (tests/gpu/bundle.sh makes it).  Needs root
# (a private mount namespace, `unshare -m`); nothing outside it changes.
# Inside the namespace:
#  - every header of a bundled package, as installed here, is replaced by a
#    file that is `#error`, every library, .a and .pc file by a text file, and
#    mpicc and pkg-config by a program that fails.  The run-time libraries of
#    the system tools bundle-build.sh runs stay (libz.so.1 for gcc and ld,
#    libmd.so.0 for dpkg-deb, ...): the GPU machine has its own; ldd of what
#    was built shows the bundle's are used.
#  - where the CUDA toolkit here was assembled from NVIDIA's wheels
#    (/usr/local/cuda/dist-info/*/RECORD), it is hidden and its files are laid
#    out again as those wheels install them (site-packages/nvidia/cu13,
#    nvidia/cudnn, nvidia/nccl: no unversioned libX.so links), and
#    bundle-build.sh finds nvcc, cuDNN, cuBLAS and NCCL there, as on the GPU
#    machine.  --no-wheels keeps /usr/local/cuda as it is.
# Then it runs BUNDLE/bundle-build.sh --smoke ARG... (a fresh work directory
# under /tmp), whose own checks (ldd: every library from the prefix or the
# CUDA view; cudnnGetVersion/ncclGetVersion; dljob --version; 3 training
# steps on the CPU backend) decide the exit status, and then
# BUNDLE/slurm-node.sh --fake-gpus 2 (a one-node cluster from the bundle's
# Slurm packages, under `flock /tmp/dljob-cluster.lock`), whose checks must
# all pass too.
set -u -o pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
wheels=yes
if [ "${1:-}" = --no-wheels ]; then wheels=no; shift; fi
bundle=$src/gpu-bundle
case ${1:-} in ''|-*) ;; *) bundle=$1; shift ;; esac
bundle=$(cd "$bundle" && pwd) || exit 1
die() { echo "bundle-selftest: $*" >&2; exit 1; }
[ -f "$bundle/bundle-build.sh" ] || die "$bundle holds no bundle-build.sh: run tests/gpu/bundle.sh first"
[ "$(id -u)" = 0 ] || die "needs root (unshare -m)"

if [ -z "${DLJOB_SELFTEST_TMP:-}" ]; then
	# the mounts live only as long as the namespace: the directory is removed
	# here, after it has ended (never while /usr/local/cuda is mounted in it)
	DLJOB_SELFTEST_TMP=$(mktemp -d /tmp/dljob-selftest.XXXXXX) || exit 1
	export DLJOB_SELFTEST_TMP
	unshare -m --propagation private bash "$0" $([ $wheels = no ] && echo --no-wheels) "$bundle" "$@"
	rc=$?
	if [ "${DLJOB_SELFTEST_KEEP:-0}" = 1 ]; then
		echo "bundle-selftest: kept $DLJOB_SELFTEST_TMP"
	else
		rm -rf "$DLJOB_SELFTEST_TMP"
	fi
	exit $rc
fi

tmp=$DLJOB_SELFTEST_TMP
printf '#error "bundle-selftest: a header of the system was used instead of the bundle'"'"'s"\n' >"$tmp/poison.h"
printf '#!/bin/sh\necho "bundle-selftest: $0 of the system was run instead of the bundle'"'"'s" >&2\nexit 1\n' >"$tmp/poison"
chmod +x "$tmp/poison"
# not empty: ld reads an empty file as an empty linker script and links on
echo "bundle-selftest: a library of the system was used instead of the bundle's" >"$tmp/poison.so"

# ---- hide the system's copies of the bundled packages ---------------------------------
# except the run-time libraries of the system's own tools that bundle-build.sh
# runs (dpkg-deb needs libmd, gcc and ld libz, ...): on the GPU machine those
# are that machine's, never the bundle's
declare -A keep=()
for t in dpkg-deb tar gzip xz zstd ar as ld gcc make sed awk grep readelf od python3 \
	bash timeout env mknod flock tee hostname getent mktemp date \
	"$(gcc -print-prog-name=cc1)" "$(gcc -print-prog-name=collect2)"; do
	p=$(command -v "$t" 2>/dev/null) || p=$t
	[ -x "$p" ] || continue
	while read -r l; do keep[$(readlink -f "$l")]=1; done < <(ldd "$p" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p')
done
n=0
kept=""
declare -A done=() listed=()
bundled=""
for deb in "$bundle"/debs/*.deb; do
	pkg=$(dpkg-deb -f "$deb" Package)
	dpkg-query -W "$pkg" >/dev/null 2>&1 && bundled="$bundled $pkg"
done
# every path the bundled packages install (usrmerge: /lib is /usr/lib): a
# -dev package's link into a package that is not bundled (libcairo2-dev's
# libcairo-gobject.so) leaves its target alone, which the system's programs
# (Debian's torch) may need
for pkg in $bundled; do
	while read -r f; do
		[ -n "$f" ] && listed[$f]=1 && listed[/usr$f]=1
		[ -n "${f#/usr}" ] && listed[${f#/usr}]=1
	done < <(dpkg-query -L "$pkg")
done
notours=0
for pkg in $bundled; do
	while read -r f; do
		case $f in /usr/share/*|/etc/*) continue ;; esac
		[ -f "$f" ] || continue
		r=$(readlink -f "$f")
		[ -n "${done[$r]:-}" ] && continue
		done[$r]=1
		if [ -n "${keep[$r]:-}" ]; then kept="$kept $(basename "$r")"; continue; fi
		[ -n "${listed[$r]:-}" ] || { notours=$((notours + 1)); continue; }
		case $r in
		*/include/*|*.h) m=$tmp/poison.h ;;
		*/bin/*) m=$tmp/poison ;;
		*) m=$tmp/poison.so ;;
		esac
		mount --bind "$m" "$r" || die "mount --bind $m $r"
		n=$((n + 1))
	done < <(dpkg-query -L "$pkg")
done
for p in mpicc pkg-config pkgconf; do
	f=$(command -v $p) && mount --bind "$tmp/poison" "$(readlink -f "$f")"
done
echo "bundle-selftest: hid $n files of the bundled packages, mpicc and pkg-config; kept for the system's tools:$kept;" \
	"left $notours targets of links into packages not bundled"
# the hiding works: the system's oneDNN header and library are unusable now
msg=$(echo '#include <oneapi/dnnl/dnnl.h>' | gcc -fsyntax-only -x c - 2>&1)
case $msg in *bundle-selftest*) ;; *) die "the system's oneapi/dnnl/dnnl.h is still usable" ;; esac
echo 'int main(void){return 0;}' | gcc -x c - -o "$tmp/a.out" -ldnnl 2>/dev/null &&
	die "the system's libdnnl still links"

# ---- CUDA as the wheels lay it out --------------------------------------------------------
if [ $wheels = yes ] && ls /usr/local/cuda/dist-info/*/RECORD >/dev/null 2>&1; then
	real=$(readlink -f /usr/local/cuda)
	mkdir -p "$tmp/cuda-real" "$tmp/site" && mount --bind "$real" "$tmp/cuda-real" || exit 1
	# RECORD lines: nvidia/<wheel dir>/<path in the toolkit>,sha256=...,size
	cut -d, -f1 "$tmp"/cuda-real/dist-info/*/RECORD | grep '^nvidia/[^/]*/' | while read -r p; do
		rest=${p#nvidia/*/}
		[ -e "$tmp/cuda-real/$rest" ] || [ -L "$tmp/cuda-real/$rest" ] || continue
		mkdir -p "$tmp/site/$(dirname "$p")" && ln -sfn "$tmp/cuda-real/$rest" "$tmp/site/$p"
	done
	mount -t tmpfs none "$real" || exit 1
	nvcc --version >/dev/null 2>&1 && die "nvcc still runs from PATH"
	export DLJOB_CUDA_SITE=$tmp/site
	echo "bundle-selftest: /usr/local/cuda hidden; its files laid out as wheels under $tmp/site/nvidia:" \
		$(ls "$tmp/site/nvidia")
fi

work=$tmp/work
t0=$(date +%s)
bash "$bundle/bundle-build.sh" --work "$work" --smoke "$@"
rc=$?
echo "bundle-selftest: bundle-build.sh exit status $rc after $(($(date +%s) - t0)) s (log: ${OUT:-$work/out}/bundle-build.log)"
[ $rc = 0 ] || exit $rc
# The GPU node under Slurm, from the bundle's Slurm packages, on fake GPUs.
# This machine's python3 with torch is Debian's, which links oneDNN, cairo,
# libpng...: the bundle's copies (the system's are hidden above).
t0=$(date +%s)
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3} DLJOB_PY_LD_LIBRARY_PATH=$work/prefix/view/lib \
	flock /tmp/dljob-cluster.lock bash "$bundle/slurm-node.sh" --work "$work" --fake-gpus 2
rc=$?
echo "bundle-selftest: slurm-node.sh --fake-gpus 2 exit status $rc after $(($(date +%s) - t0)) s (log: ${OUT:-$work/out}/slurm-node.log)"
exit $rc
