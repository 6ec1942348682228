#!/bin/bash
# Build hardening of what runs as root in slurmstepd (dljob.so) and of the
# runtime (dljob): full RELRO (GNU_RELRO + BIND_NOW), a non-executable
# stack, stack protector and _FORTIFY_SOURCE checks linked in; dljob.so
# exports nothing but the SPANK symbols.
set -u
fails=0
check() { # FILE
	local f=$1 h d s
	h=$(readelf -lW "$f") || { echo "FAIL: readelf -l $f"; fails=$((fails + 1)); return; }
	d=$(readelf -dW "$f")
	s=$(readelf -sW --dyn-syms "$f")
	grep -q GNU_RELRO <<<"$h" || { echo "FAIL: $f has no GNU_RELRO segment"; fails=$((fails + 1)); }
	grep -qE 'BIND_NOW|FLAGS.*NOW' <<<"$d" || { echo "FAIL: $f is not linked with -z now"; fails=$((fails + 1)); }
	grep -E 'GNU_STACK' <<<"$h" | grep -q 'RWE' && { echo "FAIL: $f has an executable stack"; fails=$((fails + 1)); }
	grep -q GNU_STACK <<<"$h" || { echo "FAIL: $f has no GNU_STACK header"; fails=$((fails + 1)); }
	grep -q '__stack_chk_fail' <<<"$s" || { echo "FAIL: $f has no stack protector"; fails=$((fails + 1)); }
	grep -qE '__[a-z_]+_chk(@|$| )' <<<"$s" || { echo "FAIL: $f has no _FORTIFY_SOURCE checks"; fails=$((fails + 1)); }
	echo "checked $f"
}
check "${DLJOB_SPANK:?run under make check}"
check "${DLJOB_BIN:?run under make check}"
# dljob.so exports only what slurmd and srun look up (spank/dljob.map):
# nothing of the mapping, world or common code it links may interpose on
# slurmstepd's own symbols or another plugin's.
exports=$(nm -D --defined-only "$DLJOB_SPANK" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//') ||
	{ echo "FAIL: nm -D $DLJOB_SPANK"; fails=$((fails + 1)); }
other=$(grep -vE '^(slurm_spank_[a-z_]+|plugin_(name|type|version))$' <<<"$exports")
[ -z "$other" ] || { echo "FAIL: $DLJOB_SPANK exports more than the SPANK symbols: $(echo $other)"; fails=$((fails + 1)); }
grep -qx slurm_spank_init <<<"$exports" || { echo "FAIL: $DLJOB_SPANK does not export slurm_spank_init"; fails=$((fails + 1)); }
# the CUDA backend module, where built (it runs in the user's dljob only)
# (under make check; check_packages.sh names the packaged files only, and
# the packages are built without CUDA)
mod=${DLJOB_BUILDDIR:+$DLJOB_BUILDDIR/engine/cuda/.libs/dljob-cuda.so}
[ -n "$mod" ] && [ ! -f "$mod" ] && mod=
[ -n "$mod" ] && check "$mod"
[ $fails -eq 0 ] || exit 1
echo "ok   dljob.so, dljob${mod:+ and the CUDA module}: full RELRO, non-executable stack, stack protector, _FORTIFY_SOURCE; dljob.so exports the SPANK symbols only"
