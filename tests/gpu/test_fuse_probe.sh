#!/bin/bash
# fuse_probe --selftest, without a GPU: cuDNN's backend API accepts and
# finalizes every operation of the fused BN convolution graphs the probe
# asks a GPU about (so a cuDNN upgrade that changes an attribute fails here,
# not during a rare GPU session), and the probe's CPU reference agrees with
# itself (forward, dgrad and wgrad as adjoints) on each shape.
set -u
probe=${DLJOB_BUILDDIR:?run under make check}/tests/gpu/fuse_probe
out=$("$probe" --selftest 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! grep -qx 'selftest: ok' <<<"$out"; then
	echo "FAIL: fuse_probe --selftest exited $rc:"
	tail -20 <<<"$out"
	exit 1
fi
n=$(grep -c 'operations finalized$' <<<"$out")
[ "$n" -ge 7 ] || { echo "FAIL: only $n graphs finalized:"; echo "$out"; exit 1; }
echo "ok   fuse_probe --selftest: $n graph variants finalized, the CPU reference consistent"
