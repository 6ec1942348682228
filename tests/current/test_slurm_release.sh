#!/bin/bash
# One dljob.so per Slurm release.
# 1. make install puts dljob.so into the plugin directory of the Slurm it
#    was built against: --with-slurm=DIR's DIR/lib/slurm (make
#    check-slurm-current builds with --with-slurm), else Debian's.
# 2. Under make check-slurm-current (DLJOB_OTHER_SPANK: the dljob.so of the
#    main build, made for Debian's 22.05): that plugin, listed `required` on
#    the other Slurm's cluster, is refused by Slurm itself before any of its
#    code runs: every srun fails, with a line naming the plugin and the
#    release it was built for, and the nodes stay up; the plugin built for
#    this Slurm loads and runs a step.
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1

want=$(sed -n 's/^slurm_plugindir = //p' "$DLJOB_BUILDDIR/Makefile")
if [ -n "${DLJOB_SLURM_PREFIX-}" ]; then
	[ "$want" = "$DLJOB_SLURM_PREFIX/lib/slurm" ] ||
		fail "built --with-slurm=$DLJOB_SLURM_PREFIX, but the plugin dir is '$want'"
fi
make -s -C "$DLJOB_BUILDDIR" install-slurm_pluginLTLIBRARIES DESTDIR="$WORK/inst" >"$WORK/install.log" 2>&1 ||
	fail "make install-slurm_pluginLTLIBRARIES: $(tail -5 "$WORK/install.log")"
[ -f "$WORK/inst$want/dljob.so" ] || fail "dljob.so not installed into $want: $(cd "$WORK/inst" && find . -name 'dljob*')"
echo "ok   make install puts dljob.so into $want${DLJOB_SLURM_PREFIX:+ (the plugin dir of --with-slurm=$DLJOB_SLURM_PREFIX)}"

if [ -z "${DLJOB_OTHER_SPANK-}" ]; then
	echo "ok   (the other-release check runs under make check-slurm-current)"
	exit 0
fi
[ -f "$DLJOB_OTHER_SPANK" ] || fail "DLJOB_OTHER_SPANK=$DLJOB_OTHER_SPANK is not built"
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
other=$(strings "$DLJOB_OTHER_SPANK" | sed -n 's/^dljob: built for Slurm \([0-9.]*\)$/\1/p' | head -1)
printf 'required %s\n' "$DLJOB_OTHER_SPANK" >"$CLUSTER_DIR/plugstack.conf" || fail plugstack
out=$(srun -N1 -n1 true 2>&1) && fail "srun succeeded with a dljob.so built for Slurm ${other:-another release} listed required: $out"
grep -qF "$DLJOB_OTHER_SPANK" <<<"$out" || fail "srun failed without naming the plugin: $out"
echo "ok   a dljob.so built for another Slurm release is refused: $(head -3 <<<"$out" | tr '\n' ' ')"
out=$(srun -N1 -n1 --dl-job=env true 2>&1) && fail "srun --dl-job=env succeeded with the other release's plugin: $out"
nodes_idle
cluster_plugstack "" || fail plugstack
out=$(srun -N1 -n1 --dl-job=env printenv RANK 2>&1) || fail "the plugin built for this Slurm did not run a step: $out"
[ "$out" = 0 ] || fail "RANK=$out"
echo "ok   the dljob.so built for $(slurmd -V) runs a --dl-job=env step"
nodes_idle
