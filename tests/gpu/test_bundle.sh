#!/bin/bash
# The offline GPU build bundle's own logic (tests/gpu/README), in seconds and
# without a GPU or a network:
#  1. bundle.sh --list: the package closure holds every -dev package, the
#     run-time packages of the libraries dljob links and pkgconf, and neither
#     the C library nor what only Open MPI's plugins need (libfabric, UCX);
#     every library the built dljob loads is in it; the Slurm and munge
#     packages of slurm-node.sh's one-node cluster, with the libraries their
#     programs and plugins load.
#  2. bundle-build.sh --unpack-only: dpkg-deb, ar + tar and the python
#     unpacker make the same prefix from a .deb made here, its absolute link
#     pointed back into the prefix.
#  3. bundle-build.sh --probe-cuda on a made-up wheel layout
#     (site-packages/nvidia/{cu13,cudnn,nccl}, no unversioned links): nvcc from
#     nvidia/cu13/bin, cuDNN and NCCL from their own directories, the libX.so
#     links made; and a toolkit that has cuDNN is taken before the wheels.
# The whole build from a bundle is tests/gpu/bundle-selftest.sh (root, ~2 min).
. "$DLJOB_SRCDIR/tests/lib.sh"
g=$DLJOB_SRCDIR/tests/gpu
t=$(mktemp -d /tmp/dljob-test-bundle.XXXXXX) || exit 1
trap 'rm -rf "$t"' EXIT
unset OUT NVCC CUDA_HOME

# ---- 1. the package closure -----------------------------------------------------------
list=$(bash "$g/bundle.sh" --list 2>&1)
rc=$?
echo "$list"
check "bundle.sh --list exits 0" test $rc = 0
has() { echo "$list" | grep -q "^$1="; }
lacks() { ! has "$1"; }
for p in libdnnl-dev libdnnl2 libhwloc-dev libhwloc15 libpmix-dev libpmix2 libopenmpi-dev libopenmpi3 \
	libjpeg62-turbo-dev libjpeg62-turbo libpng-dev libpng16-16 zlib1g-dev zlib1g libslurm-dev \
	libevent-core-2.1-7 libjansson-dev libjansson4 libprotobuf-c-dev libprotobuf-c1 libcairo2-dev libcairo2 \
	libsodium-dev libsodium23 \
	pkgconf-bin libpkgconf3 make \
	munge libmunge2 slurmctld slurmd slurm-client slurm-wlm-basic-plugins liblz4-1 libpam0g libnuma1; do
	check "closure holds $p" has $p
done
for p in libc6 libstdc++6 libgcc-s1 libfabric1 libucx0 libslurm38 gfortran-12 \
	slurm-wlm-mysql-plugin libmariadb3 slurmdbd; do
	check "closure leaves out $p" lacks $p
done
# every library the dljob built here loads (ldd: its NEEDED entries and
# theirs) comes from a bundled package or the C library / compiler run time:
# a new dependency (libsodium was one) fails here, not on the GPU machine
for l in $(ldd "${DLJOB_BIN:?}" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'); do
	r=$(readlink -f "$l") o=""
	for c in "$l" "$r" "${l#/usr}" "/usr$l" "${r#/usr}" "/usr$r"; do
		o=$(dpkg-query -S "$c" 2>/dev/null | sed -n 's/^\([^ ,:]*\)\(:[a-z0-9]*\)\{0,1\}: \/.*/\1/p' | head -1)
		[ -n "$o" ] && break
	done
	case " libc6 libgcc-s1 libstdc++6 libgomp1 " in *" $o "*) continue ;; esac
	check "dljob's $(basename "$l") (${o:-no package}) is in the bundle" has "${o:-none}"
done

# the same for what the cluster runs: slurmd's, srun's, munged's libraries
for b in /usr/sbin/slurmd /usr/sbin/slurmstepd /usr/bin/srun /usr/sbin/munged; do
	for l in $(ldd "$b" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'); do
		r=$(readlink -f "$l") o=""
		for c in "$l" "$r" "${l#/usr}" "/usr$l" "${r#/usr}" "/usr$r"; do
			o=$(dpkg-query -S "$c" 2>/dev/null | sed -n 's/^\([^ ,:]*\)\(:[a-z0-9]*\)\{0,1\}: \/.*/\1/p' | head -1)
			[ -n "$o" ] && break
		done
		case " libc6 libgcc-s1 libstdc++6 libgomp1 " in *" $o "*) continue ;; esac
		check "$(basename "$b")'s $(basename "$l") (${o:-no package}) is in the bundle" has "${o:-none}"
	done
done

# ---- 2. unpacking ---------------------------------------------------------------------------
mkdir -p "$t/b/debs" "$t/pkg/DEBIAN" "$t/pkg/usr/include" "$t/pkg/usr/lib/x86_64-linux-gnu" || exit 1
cp "$g/bundle-build.sh" "$t/b/" || exit 1
printf 'Package: dljob-bundle-test\nVersion: 1\nArchitecture: amd64\nMaintainer: dljob <dljob@localhost>\nDescription: test\n' \
	>"$t/pkg/DEBIAN/control"
echo '#define T 1' >"$t/pkg/usr/include/t.h"
echo 'a library' >"$t/pkg/usr/lib/x86_64-linux-gnu/libt.so.1.0"
ln -s libt.so.1.0 "$t/pkg/usr/lib/x86_64-linux-gnu/libt.so.1"
ln -s /usr/lib/x86_64-linux-gnu/libt.so.1.0 "$t/pkg/usr/lib/x86_64-linux-gnu/libt.so"
dpkg-deb -Zxz --root-owner-group -b "$t/pkg" "$t/b/debs/t.deb" >/dev/null || exit 1
methods="dpkg python"
if command -v xz >/dev/null; then methods="$methods ar"; else echo "# no xz here: ar + tar not checked"; fi
for m in $methods; do
	w=$t/w-$m
	DLJOB_BUNDLE_UNPACK=$m bash "$t/b/bundle-build.sh" --unpack-only --work "$w" >"$t/$m.log" 2>&1
	check "unpack with $m exits 0" test $? = 0 || cat "$t/$m.log"
	(cd "$w/prefix" && find usr view -printf '%p %y %l\n' | sed "s|$w|W|g" | sort) >"$t/$m.tree"
	check "unpack with $m: libt.so points into the prefix" \
		test "$(readlink "$w/prefix/usr/lib/x86_64-linux-gnu/libt.so")" = "$w/prefix/usr/lib/x86_64-linux-gnu/libt.so.1.0"
	check "unpack with $m: the view has libt.so.1" test "$(cat "$w/prefix/view/lib/libt.so.1")" = "a library"
	check "unpack with $m: headers in the view" test -f "$w/prefix/view/include/t.h"
done
[ -f "$t/ar.tree" ] && check "dpkg and ar give the same tree" cmp -s "$t/dpkg.tree" "$t/ar.tree"
check "dpkg and python give the same tree" cmp -s "$t/dpkg.tree" "$t/python.tree"

# ---- 3. finding CUDA -------------------------------------------------------------------------
s=$t/site/nvidia
mkdir -p "$s/cu13/bin" "$s/cu13/include" "$s/cu13/lib" "$s/cudnn/include" "$s/cudnn/lib" \
	"$s/nccl/include" "$s/nccl/lib" || exit 1
printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' >"$s/cu13/bin/nvcc"
chmod +x "$s/cu13/bin/nvcc"
touch "$s/cu13/include/cuda_runtime.h" "$s/cu13/include/cublas_v2.h" "$s/cu13/include/cublasLt.h" \
	"$s/cu13/lib/libcudart.so.13" "$s/cu13/lib/libcublas.so.13" "$s/cu13/lib/libcublasLt.so.13" \
	"$s/cudnn/include/cudnn.h" "$s/cudnn/lib/libcudnn.so.9" "$s/cudnn/lib/libcudnn_graph.so.9" \
	"$s/nccl/include/nccl.h" "$s/nccl/lib/libnccl.so.2"
probe() { # probe WORK ROOTS
	env PATH=/usr/bin:/bin DLJOB_CUDA_ROOTS="$2" DLJOB_CUDA_SITE="$t/site" \
		bash "$t/b/bundle-build.sh" --probe-cuda --work "$1" >"$1.log" 2>&1
}
probe "$t/wp" ""
check "probe on wheels exits 0" test $? = 0 || cat "$t/wp.log"
v=$t/wp/cuda
check "nvcc from nvidia/cu13/bin" grep -q "nvcc: $s/cu13/bin/nvcc" "$t/wp.log"
check "libcudnn.so made, to the cudnn wheel" test "$(readlink "$v/lib64/libcudnn.so")" = "$s/cudnn/lib/libcudnn.so.9"
check "libnccl.so made, to the nccl wheel" test "$(readlink "$v/lib64/libnccl.so")" = "$s/nccl/lib/libnccl.so.2"
check "libcudart.so made, to the cu13 wheel" test "$(readlink "$v/lib64/libcudart.so")" = "$s/cu13/lib/libcudart.so.13"
check "cuDNN's sub-libraries linked too" test "$(readlink "$v/lib64/libcudnn_graph.so.9")" = "$s/cudnn/lib/libcudnn_graph.so.9"
check "cudnn.h from the cudnn wheel" test "$(readlink "$v/include/cudnn.h")" = "$s/cudnn/include/cudnn.h"
check "cuda_runtime.h from the cu13 wheel" test "$(readlink "$v/include/cuda_runtime.h")" = "$s/cu13/include/cuda_runtime.h"
# a toolkit with nvcc, the runtime and cuDNN (no NCCL): its cuDNN wins, NCCL still from the wheel
k=$t/tk
mkdir -p "$k/bin" "$k/include" "$k/lib64" && cp "$s/cu13/bin/nvcc" "$k/bin/" || exit 1
touch "$k/include/cuda_runtime.h" "$k/include/cudnn.h" "$k/include/cublas_v2.h" "$k/include/cublasLt.h" \
	"$k/lib64/libcudart.so.13" "$k/lib64/libcudnn.so.9" "$k/lib64/libcublas.so.13" "$k/lib64/libcublasLt.so.13"
probe "$t/wk" "$k"
check "probe with a toolkit exits 0" test $? = 0 || cat "$t/wk.log"
check "nvcc from the toolkit" grep -q "nvcc: $k/bin/nvcc" "$t/wk.log"
check "cuDNN from the toolkit" test "$(readlink "$t/wk/cuda/lib64/libcudnn.so")" = "$k/lib64/libcudnn.so.9"
check "NCCL from the wheel" test "$(readlink "$t/wk/cuda/lib64/libnccl.so")" = "$s/nccl/lib/libnccl.so.2"
# nothing to be found: a clear error
rm -rf "$s/nccl"
probe "$t/wn" ""
check "no NCCL: probe fails" test $? != 0
check "no NCCL: the error names nccl.h" grep -q "nccl.h with libnccl.so not found" "$t/wn.log"
finish
