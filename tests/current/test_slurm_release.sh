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
# 3. Built for Slurm 25.05 or later, dljob.so sets slurm_spank_init_failure_mode
#    to ESPANK_JOB_FAILURE (a failing slurm_spank_init fails the job, where
#    Slurm's default drains the node); built for an older release, it has
#    no such symbol (those releases have neither the variable nor the value).
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

# The variable's value is read from the file (objdump): dljob.so cannot be
# loaded outside Slurm (it is linked -z now, and Slurm's daemons provide
# the spank_* functions).
so=$DLJOB_BUILDDIR/.libs/dljob.so
inc=${DLJOB_SLURM_PREFIX:+-I$DLJOB_SLURM_PREFIX/include}
cat >"$WORK/mode.c" <<'EOC'
#include <stdio.h>
#include <slurm/slurm.h>
int main(void)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
	printf("%d\n", ESPANK_JOB_FAILURE);
#else
	printf("none\n");
#endif
	return 0;
}
EOC
# shellcheck disable=SC2086
"${CC:-cc}" $inc -o "$WORK/mode" "$WORK/mode.c" >"$WORK/mode.log" 2>&1 || fail "cannot build the check: $(cat "$WORK/mode.log")"
want=$("$WORK/mode") || fail "$WORK/mode failed"
# "ADDR g O SECTION SIZE NAME" for a defined data symbol.
read -r addr sect < <(objdump -t "$so" | awk '$NF == "slurm_spank_init_failure_mode" && $2 == "g" { print $1, $4 }')
if [ "$want" = none ]; then
	[ -z "${addr-}" ] || fail "dljob.so defines slurm_spank_init_failure_mode for a Slurm without it"
	echo "ok   dljob.so has no slurm_spank_init_failure_mode (built for Slurm < 25.05)"
else
	[ -n "${addr-}" ] || fail "dljob.so built for Slurm >= 25.05 lacks slurm_spank_init_failure_mode: a failing init drains the node"
	nm -D --defined-only "$so" | grep -qw slurm_spank_init_failure_mode || fail "slurm_spank_init_failure_mode is not exported"
	# The 4 bytes at addr, little endian.
	hex=$(objdump -s -j "$sect" --start-address=$((16#$addr)) --stop-address=$((16#$addr + 4)) "$so" |
		awk 'f { print $2; exit } /^Contents of section/ { f = 1 }')
	[ ${#hex} -eq 8 ] || fail "cannot read slurm_spank_init_failure_mode from $sect at $addr: '$hex'"
	got=$((16#${hex:6:2}${hex:4:2}${hex:2:2}${hex:0:2}))
	[ "$got" = "$want" ] || fail "slurm_spank_init_failure_mode=$got, want ESPANK_JOB_FAILURE=$want"
	echo "ok   dljob.so: slurm_spank_init_failure_mode=ESPANK_JOB_FAILURE ($got): a failing init fails the job, not the node"
fi

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
