#!/bin/bash
# Make the offline build bundle for a GPU machine that has CUDA and a C
# compiler but no package manager, no network and none of dljob's other build
# dependencies (issue 17, part 1).  Runs on the Debian 12 development machine,
# where contrib/install-deps.sh has installed those dependencies.
#
#   tests/gpu/bundle.sh [--out DIR] [--builddir DIR]   make the bundle
#   tests/gpu/bundle.sh --list                          print the packages only
#
# The bundle (default: gpu-bundle/ at the top of the checkout, which
# .gitignore ignores, so the device tool's `carry` can name it) holds:
#   dljob-VERSION.tar.gz   `make dist`: configure already generated
#   debs/*.deb             `apt-get download` of the -dev packages below and of
#                          the shared libraries they need (computed, see below)
#   bundle-build.sh        copy of tests/gpu/bundle-build.sh: unpacks the
#                          packages into a private prefix and builds dljob there
#   slurm-node.sh          copy of tests/gpu/slurm-node.sh: a one-node private
#                          Slurm cluster from the bundled packages (after
#                          bundle-build.sh), the srun checks on its GPUs
#   slurm-conf.sh          copy of tests/cluster/slurm-conf.sh: the slurm.conf
#                          generator slurm-node.sh shares with the test suite
#   MANIFEST               date, source commit, package list, sizes, sha256
# tests/gpu/README says how to use it on a GPU machine.
#
# Package closure: the -dev packages of DEV_PKGS (headers, .so links, .pc
# files), plus the package of every shared library that the libraries dljob
# links (LINK_LIBS, the -l names configure puts on the link line) and the
# programs of DEV_PKGS need at run time (ldd: the whole transitive closure,
# as installed here), less
# BASE_PKGS (the C library and the compiler's own run-time libraries, which
# any machine that can compile C has).  Debian's Depends are not followed:
# they name what Open MPI's plugins, Fortran and ssh would need (libfabric,
# UCX, gfortran, ...), which a single-process dljob never loads.  Packages
# whose libraries nothing links (HEADER_PKGS) contribute headers only.
# The Slurm and munge packages of RUN_PKGS (slurm-node.sh's one-node private
# cluster on the GPU machine, issue 37 part 4) are taken whole: every
# program and plugin of theirs is an ELF file whose ldd closure is added.
set -u -o pipefail

DEV_PKGS="libslurm-dev libhwloc-dev libpmix-dev libopenmpi-dev libdnnl-dev
  libjpeg62-turbo-dev libpng-dev zlib1g-dev libjansson-dev libprotobuf-c-dev libcairo2-dev libsodium-dev
  pkgconf-bin make"   # make: used where the machine has none
HEADER_PKGS="libslurm-dev"     # configure reads slurm/spank.h; nothing links libslurm
RUN_PKGS="munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins"   # run, not linked
BASE_PKGS="libc6 libgcc-s1 libstdc++6 libgomp1"
LINK_LIBS="dnnl hwloc pmix mpi jpeg png16 z jansson protobuf-c cairo sodium"

src=$(cd "$(dirname "$0")/../.." && pwd)
out=$src/gpu-bundle
builddir=""
list_only=0
die() { echo "bundle.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--list) list_only=1 ;;
	--out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift ;;
	--builddir) [ $# -ge 2 ] || die "--builddir needs a directory"; builddir=$2; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
	shift
done

in_list() { case " $(echo $2) " in *" $1 "*) return 0 ;; esac; return 1; }

# owners PATH...: fill owned[PATH] with the Debian package that installed
# PATH (usrmerge: /lib and /usr/lib name the same files, dpkg knows one of
# them), asking dpkg-query once for all the paths (one call per library took
# minutes for the Slurm plugins' closure on a loaded machine)
declare -A owned=()
owners() {
	local p r c line pkg path
	local -A by=()
	local cands=()
	for p in "$@"; do
		r=$(readlink -f "$p")
		cands+=("$p" "$r" "${p#/usr}" "/usr$p" "${r#/usr}" "/usr$r")
	done
	while IFS= read -r line; do
		pkg=$(echo "$line" | sed -n 's/^\([^ ,:]*\)\(:[a-z0-9]*\)\{0,1\}[,:].*/\1/p')
		path=${line#*: }
		[ -n "$pkg" ] && [ -z "${by[$path]:-}" ] && by[$path]=$pkg
	done < <(printf '%s\0' "${cands[@]}" | sort -zu | xargs -0 dpkg-query -S 2>/dev/null)
	for p in "$@"; do
		r=$(readlink -f "$p")
		for c in "$p" "$r" "${p#/usr}" "/usr$p" "${r#/usr}" "/usr$r"; do
			[ -n "${by[$c]:-}" ] && { owned[$p]=${by[$c]}; break; }
		done
	done
}

# Compute the closure into pkgs[] (name -> why).
declare -A why=()
for p in $DEV_PKGS $RUN_PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		die "$p is not installed here (run contrib/install-deps.sh): the closure is read off the installed libraries"
	why[$p]="listed"
done
elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }
# every library (and linked file) in the order first needed, with who needs it
declare -A needer=()
libs_in_order=()
for p in $DEV_PKGS $RUN_PKGS; do
	in_list "$p" "$HEADER_PKGS" && continue
	if in_list "$p" "$RUN_PKGS"; then
		# every program and plugin (slurmd, munged, the slurm-wlm/*.so)
		files=$(dpkg-query -L "$p" | grep -E '/s?bin/[^/]*$|\.so(\.[0-9.]*)?$' | while read -r f; do
			elf "$f" && echo "$f"; done)
	else
		# the package's libraries that dljob links (.so links) and its programs
		files=$(dpkg-query -L "$p" | grep -E "/lib/(.*/)?lib($(echo $LINK_LIBS | tr ' ' '|'))\.so\$|/bin/[^/]*\$")
	fi
	for f in $files; do
		[ -e "$f" ] || continue
		lo=$(ldd "$f" 2>/dev/null)
		nf=$(echo "$lo" | grep "not found") && die "ldd $f: $nf"
		for l in $(readlink -f "$f") $(echo "$lo" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'); do
			[ -n "${needer[$l]:-}" ] && continue
			needer[$l]=$f
			libs_in_order+=("$l")
		done
	done
done
owners "${libs_in_order[@]}"
for l in "${libs_in_order[@]}"; do
	o=${owned[$l]:-}
	[ -n "$o" ] || die "no Debian package owns $l (needed by ${needer[$l]})"
	in_list "$o" "$BASE_PKGS" && continue
	[ -n "${why[$o]:-}" ] || why[$o]="needed by $(basename "${needer[$l]}")"
done
pkgs=$(printf '%s\n' "${!why[@]}" | sort)
if [ $list_only = 1 ]; then
	for p in $pkgs; do
		printf '%s=%s\t%s\n' "$p" "$(dpkg-query -W -f='${Version}' "$p")" "${why[$p]}"
	done
	exit 0
fi

# ---- the bundle -------------------------------------------------------------------
command -v apt-get >/dev/null || die "apt-get not found"
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ] && [ ! -f "$out/MANIFEST" ]; then
	die "$out exists, is not empty and holds no MANIFEST: not a bundle, not overwriting it"
fi
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
rm -rf "$out/debs" "$out"/dljob-*.tar.gz "$out/MANIFEST" "$out/bundle-build.sh" "$out/slurm-node.sh" "$out/slurm-conf.sh" "$out/README"
mkdir -p "$out/debs" || exit 1

# `make dist` from a configured build directory (the given one, an in-tree
# build, or a fresh one configured here)
tmpb=""
if [ -z "$builddir" ]; then
	if [ -f "$src/config.status" ]; then
		builddir=$src
	else
		[ -x "$src/configure" ] || (cd "$src" && ./autogen.sh) || die "autogen.sh failed"
		tmpb=$(mktemp -d /tmp/dljob-bundle-dist.XXXXXX) || exit 1
		builddir=$tmpb
		echo "bundle.sh: configuring in $builddir for make dist"
		(cd "$builddir" && "$src/configure" -q --without-cuda >configure.out 2>&1) ||
			{ tail -20 "$builddir/configure.out"; die "configure failed (see above)"; }
	fi
fi
echo "bundle.sh: make dist in $builddir"
make -s -C "$builddir" dist >"$out/dist.log" 2>&1 || { tail -20 "$out/dist.log"; die "make dist failed"; }
tarball=$(ls -t "$builddir"/dljob-*.tar.gz | head -1)
mv "$tarball" "$out/" && rm -f "$out/dist.log" || exit 1
[ -n "$tmpb" ] && rm -rf "$tmpb"

echo "bundle.sh: apt-get download of $(echo $pkgs | wc -w) packages"
# the installed version (the closure was read off it); the archive's current
# one where the installed version is no longer downloadable
for p in $pkgs; do
	v=$(dpkg-query -W -f='${Version}' "$p")
	if ! (cd "$out/debs" && apt-get -q download "$p=$v") >>"$out/download.log" 2>&1; then
		echo "bundle.sh: warning: $p=$v is not downloadable, taking the archive's version"
		(cd "$out/debs" && apt-get -q download "$p") >>"$out/download.log" 2>&1 ||
			{ tail -20 "$out/download.log"; die "apt-get download $p failed (apt-get update?)"; }
	fi
done
rm -f "$out/download.log"
for f in bundle-build.sh slurm-node.sh; do
	cp "$src/tests/gpu/$f" "$out/$f" && chmod +x "$out/$f" || exit 1
done
cp "$src/tests/cluster/slurm-conf.sh" "$out/slurm-conf.sh" || exit 1
cp "$src/tests/gpu/README" "$out/README" || exit 1

# the newest glibc symbol version the bundled libraries and programs use
x=$(mktemp -d /tmp/dljob-bundle-glibc.XXXXXX) || exit 1
for d in "$out"/debs/*.deb; do dpkg-deb -x "$d" "$x" || die "dpkg-deb -x $d"; done
glibc=$(find "$x" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec objdump -T {} + 2>/dev/null |
	grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -V | tail -1)
rm -rf "$x"
[ -n "$glibc" ] || die "cannot read the glibc versions the packages need (objdump)"

commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo " (with uncommitted changes)")
{
	echo "dljob GPU build bundle, made $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release; echo "$PRETTY_NAME") by tests/gpu/bundle.sh"
	echo "source: $(basename "$out"/dljob-*.tar.gz) from commit $commit$dirty"
	echo "needs: glibc >= $glibc"
	echo "packages:"
	for p in $pkgs; do
		printf '  %-28s %-26s %s\n' "$p" "$(dpkg-deb -f "$(ls "$out"/debs/"$p"_*.deb | head -1)" Version)" "${why[$p]}"
	done
	echo "files:"
	(cd "$out" && for f in dljob-*.tar.gz bundle-build.sh slurm-node.sh slurm-conf.sh README debs/*.deb; do
		printf '  %s %9d %s\n' "$(sha256sum "$f" | cut -c1-64)" "$(stat -c %s "$f")" "$f"
	done)
} >"$out/MANIFEST"
size=$(du -sb "$out" | cut -f1)
echo "bundle.sh: $out: $(ls "$out"/debs | wc -l) packages, $((size / 1048576)) MiB"
[ "$size" -lt $((40 * 1048576)) ] || echo "bundle.sh: warning: over the 40 MiB target" >&2
echo "bundle.sh: on the GPU machine: bash gpu-bundle/bundle-build.sh (tests/gpu/README)"
