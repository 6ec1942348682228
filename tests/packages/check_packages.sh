#!/bin/bash
# make check-packages: build dljob's Debian packages (dpkg-buildpackage) and
# RPMs (rpmbuild -tb) from the make dist tarball, check what they hold,
# install the .debs on this machine, run the README's quick-start job on the
# private Slurm cluster with the INSTALLED plugin and runtime, then purge
# the packages so the machine is left as found.
#
#   tests/packages/check_packages.sh TARBALL RESULT_FILE
#
# Needs root, dpkg-dev, debhelper, fakeroot, lintian, rpm, rpm2cpio, cpio,
# man-db (contrib/install-deps.sh)
# and what the cluster tests need.  Refuses to run where dljob or
# slurm-spank-dljob is already installed (it would replace and then purge
# the admin's packages).  Ends with 'check-packages: N passed, N failed' and
# writes "N N" to RESULT_FILE for .ci/run.  Takes ~4 min on 2 cores, most of
# it the two builds and the one-epoch training.
set -u
tarball=${1:?usage: check_packages.sh TARBALL RESULT_FILE}
result=${2:?usage: check_packages.sh TARBALL RESULT_FILE}
src=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${DLJOB_FMNIST:-/usr/share/datasets/fashion-mnist}
PKGS="dljob slurm-spank-dljob"
APT="apt-get -o DPkg::Lock::Timeout=600 -y -q"
export DEBIAN_FRONTEND=noninteractive

pass=0 failed=0
ok()   { pass=$((pass + 1)); echo "ok   - $*"; }
fail() { failed=$((failed + 1)); echo "FAIL - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; fi; }
# Count the stop as a failure, write the result and exit (the EXIT trap
# stops the cluster and purges what was installed).
stop() { fail "$*"; exit 1; }
report() {
	echo "$pass $failed" >"$result"
	echo "check-packages: $pass passed, $failed failed"
}
step() { echo "=== check-packages: $* ($(date +%T))"; }

# Same list, one file per line, sorted: diff shows what differs.
same_list() { # DESC EXPECTED ACTUAL
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		fail "$1:"; diff <(echo "$2") <(echo "$3") | sed 's/^/    /'
	fi
}

work= installed= cluster_up=
cleanup() {
	local rc=$?
	[ -n "$cluster_up" ] && cluster_stop
	if [ -n "$installed" ]; then
		step "purge $PKGS"
		# shellcheck disable=SC2086
		$APT purge $PKGS >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "apt-get purge $PKGS"; }
		local p left=
		for p in $PKGS; do
			dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q -v "not-installed" && left="$left $p"
		done
		[ -z "$left" ] && [ ! -e /etc/slurm/plugstack.conf.d/dljob.conf ] && [ ! -e /usr/bin/dljob ] &&
			ok "purged: no package, /usr/bin/dljob or plugstack.conf.d/dljob.conf left" ||
			fail "after purge:$left $(ls /usr/bin/dljob /etc/slurm/plugstack.conf.d/dljob.conf 2>&1)"
	fi
	[ -n "$work" ] && [ -z "${CHECK_PACKAGES_KEEP-}" ] && rm -rf "$work"
	[ -n "$work" ] && [ -n "${CHECK_PACKAGES_KEEP-}" ] && echo "kept $work"
	report
	[ $rc -eq 0 ] && [ $failed -eq 0 ]
	exit $?
}

[ "$(id -u)" -eq 0 ] || { fail "must run as root (it installs packages and starts slurmd)"; report; exit 1; }
for c in dpkg-buildpackage dh fakeroot lintian rpmbuild rpm rpm2cpio cpio flock; do
	command -v "$c" >/dev/null || { fail "missing $c: run contrib/install-deps.sh"; report; exit 1; }
done
[ -f "$tarball" ] || { fail "no tarball $tarball"; report; exit 1; }
# One run at a time on a machine: installing and purging are global.
exec 9>/run/lock/dljob-check-packages.lock && flock -w 900 9 ||
	{ fail "another check-packages holds /run/lock/dljob-check-packages.lock"; report; exit 1; }
for p in $PKGS; do
	if dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q -v "not-installed"; then
		fail "$p is already installed here: this test would replace it, then purge it (remove it first)"
		report; exit 1
	fi
done
work=$(mktemp -d /tmp/dljob-pkg.XXXXXX) || { fail "mktemp"; report; exit 1; }
trap cleanup EXIT
# Killed (a CI timeout, ^C): still stop the cluster and purge.  The
# timeouts below run in the foreground so that srun gets the signal too.
trap 'fail "interrupted"; exit 1' INT TERM HUP
cd "$work" || stop "cd $work"

version=$(basename "$tarball" .tar.gz); version=${version#dljob-}
# The Slurm the plugin is built against, from the installed headers'
# package (independent of what configure and debian/rules read).
slurm_up=$(dpkg-query -W -f='${Version}' libslurm-dev 2>/dev/null | sed 's/-[^-]*$//; s/^[0-9]*://')
[ -n "$slurm_up" ] || stop "libslurm-dev is not installed"
slurm_next=$(echo "$slurm_up" | awk -F. '{ printf "%s.%s.%d", $1, $2, $3 + 1 }')
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# ---- Debian packages ---------------------------------------------------------
step "dpkg-buildpackage -b from $(basename "$tarball")"
tar xzf "$tarball" || stop "cannot unpack $tarball"
chv=$(cd "dljob-$version" && dpkg-parsechangelog -S Version)
check "debian/changelog's version $chv is the release $version, Debian revision 1 or later" \
	grep -q -E "^$version-[1-9][0-9]*\$" <<<"$chv"
if ! (cd "dljob-$version" && dpkg-buildpackage -us -uc -b -j2) >deb-build.log 2>&1; then
	tail -40 deb-build.log
	stop "dpkg-buildpackage failed (whole log: CHECK_PACKAGES_KEEP=1, then $work/deb-build.log)"
fi
ok "dpkg-buildpackage -us -uc -b built the packages"
deb_rt=$work/dljob_${chv}_$(dpkg --print-architecture).deb
deb_pl=$work/slurm-spank-dljob_${chv}_$(dpkg --print-architecture).deb
[ -f "$deb_rt" ] && [ -f "$deb_pl" ] || stop "no $deb_rt and $deb_pl: $(ls "$work")"

# The files each package holds (not directories), man pages where they belong.
files() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | sort; }
same_list "dljob holds the runtime, dljob(1), its sub-command pages and its docs" \
	"$(printf '%s\n' /usr/bin/dljob /usr/share/doc/dljob/README.md.gz /usr/share/doc/dljob/changelog.Debian.gz \
		/usr/share/doc/dljob/copyright /usr/share/man/man1/dljob.1.gz /usr/share/man/man1/dljob-pack.1.gz \
		/usr/share/man/man1/dljob-topo.1.gz /usr/share/man/man1/dljob-plan.1.gz /usr/share/man/man1/dljob-report.1.gz \
		/usr/share/man/man1/dljob-eval.1.gz | sort)" "$(files "$deb_rt")"
same_list "slurm-spank-dljob holds dljob.so, the plugstack.conf.d snippet and spank-dljob(8)" \
	"$(printf '%s\n' "/usr/lib/$arch/slurm-wlm/dljob.so" /etc/slurm/plugstack.conf.d/dljob.conf \
		/usr/share/doc/slurm-spank-dljob/changelog.Debian.gz /usr/share/doc/slurm-spank-dljob/copyright \
		/usr/share/man/man8/spank-dljob.8.gz | sort)" "$(files "$deb_pl")"
dep=$(dpkg-deb -f "$deb_pl" Depends)
check "the plugin depends on the Slurm it was built against, $slurm_up (Depends: $dep)" \
	grep -q -F "slurm-wlm-basic-plugins (>= $slurm_up), slurm-wlm-basic-plugins (<< $slurm_next~)" <<<"$dep"
check "the plugin depends on the runtime of the same build" grep -q -F "dljob (= $chv)" <<<"$dep"
slurm_inst=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins)
check "the installed slurm-wlm-basic-plugins $slurm_inst satisfies it" \
	bash -c "dpkg --compare-versions '$slurm_inst' ge '$slurm_up' && dpkg --compare-versions '$slurm_inst' lt '$slurm_next~'"
check "/etc/slurm/plugstack.conf.d/dljob.conf is a conffile (kept on upgrade, removed on purge)" \
	bash -c "dpkg-deb -I '$deb_pl' conffiles | grep -qx /etc/slurm/plugstack.conf.d/dljob.conf"
for d in "$deb_rt" "$deb_pl"; do
	check "$(basename "$d") has shared-library Depends (shlibs)" \
		bash -c "dpkg-deb -f '$d' Depends | grep -q libc6"
done

# lintian, less what a locally built package always has: the placeholder
# maintainer address (dljob@localhost) and a changelog that closes no bug.
lint=$(lintian --fail-on none "$work/dljob_${chv}_$(dpkg --print-architecture).changes" 2>&1 |
	grep -E '^[EW]: ' | grep -v -E ': (bogus-mail-host|bogus-mail-host-in-debian-changelog|initial-upload-closes-no-bugs) ')
check "lintian reports no other error or warning${lint:+:
$lint}" test -z "$lint"

# ---- install and look at what landed ------------------------------------------
step "install the .debs"
$APT install --no-install-recommends "$deb_rt" "$deb_pl" >install.log 2>&1 ||
	{ cat install.log; stop "apt-get install of the .debs failed"; }
installed=1
ok "installed $PKGS $chv"
conf=/etc/slurm/plugstack.conf.d/dljob.conf
active=$(grep -v -E '^[[:space:]]*(#|$)' "$conf")
check "the installed snippet loads nothing (Debian's plugstack.conf includes plugstack.conf.d/*.conf)${active:+: $active}" \
	test -z "$active"
line=$(sed -n 's/^#required /required /p' "$conf")
check "it has one commented 'required' line to enable" test "$(grep -c . <<<"$line")" -eq 1
read -r _ so args <<<"$line"
rt=$(sed -n 's/.*runtime=\([^ ]*\).*/\1/p' <<<"$args")
check "its plugin path $so is the installed dljob.so" test "$so" = "/usr/lib/$arch/slurm-wlm/dljob.so" -a -f "$so"
check "its runtime= $rt is the installed dljob" test "$rt" = /usr/bin/dljob -a -x "$rt"
check "dljob --version runs" /usr/bin/dljob --version
check "the installed dljob.so and dljob are hardened (tests/test_hardening.sh)" \
	env DLJOB_SPANK="$so" DLJOB_BIN="$rt" bash "$src/tests/test_hardening.sh"
for m in /usr/share/man/man1/dljob.1.gz /usr/share/man/man1/dljob-pack.1.gz /usr/share/man/man1/dljob-topo.1.gz /usr/share/man/man1/dljob-plan.1.gz \
	/usr/share/man/man1/dljob-report.1.gz /usr/share/man/man1/dljob-eval.1.gz /usr/share/man/man8/spank-dljob.8.gz; do
	check "$m renders" bash -c "man -l '$m' 2>&1 >/dev/null | grep -q . && exit 1; man -l '$m' | grep -q -i dljob"
done

# ---- the quick-start job on the private cluster, with the installed files ------
step "private cluster with the installed plugin"
[ -r "$DATA/train-images-idx3-ubyte.gz" ] || [ -r "$DATA/train-images-idx3-ubyte" ] ||
	stop "no Fashion-MNIST in $DATA (apt install dataset-fashion-mnist)"
# The snippet's line as an admin enables it, with this machine's data.
args=$(sed -e "s|data_allow=[^ ]*|data_allow=$DATA|" -e "s|default_data=[^ ]*|default_data=$DATA|" <<<"$args")
# Nothing from a build tree or /usr/local: the installed dljob is the one
# on the tasks' PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset DLJOB_BIN DLJOB_BUILDDIR
export DLJOB_SPANK=$so DLJOB_PLUGSTACK_ARGS=$args
# shellcheck source=../cluster/cluster.sh
. "$src/tests/cluster/cluster.sh" || stop "cannot source tests/cluster/cluster.sh"
cluster_up=1
cluster_start || stop "the private Slurm cluster did not start"
check "the cluster's plugstack.conf is the enabled snippet line: $(cat "$CLUSTER_DIR/plugstack.conf")" \
	grep -q -x "required $so $args" "$CLUSTER_DIR/plugstack.conf"
export SLURM_TIMELIMIT=10

# Without runtime=, the plugin's built-in default must be the installed
# runtime: dljob on PATH is /usr/bin/dljob, which the plugin accepts only
# if it is that default.
cluster_plugstack "$(sed 's|runtime=[^ ]*||' <<<"$args")" || stop "cluster_plugstack"
out=$(timeout --foreground 60 srun -N1 -n1 --dl-job=resnet20 dljob --version 2>&1)
check "without runtime=, the plugin's default runtime is /usr/bin/dljob: $(tail -2 <<<"$out" | tr '\n' ' ')" \
	grep -q "^dljob $version" <<<"$out"
cluster_plugstack "$args" || stop "cluster_plugstack"

step "README quick start: srun -N2 -n2 --mpi=pmix --dl-job=resnet20 --dl-data=$DATA --dl-epochs=1 dljob"
out_dir=$work/quickstart
t0=$(date +%s)
# As contrib/quickstart.sh: both "nodes" are this host, so Open MPI's
# shared-memory transport would fail across them; TCP instead.
OMPI_MCA_btl=self,tcp timeout --foreground 900 srun -N2 -n2 --mpi=pmix --dl-job=resnet20 --dl-data="$DATA" \
	--dl-epochs=1 --dl-out="$out_dir" dljob >quickstart.log 2>&1
rc=$?
tail -5 quickstart.log
check "the quick-start job exited 0 in $(( $(date +%s) - t0 )) s (rc $rc)" test $rc -eq 0
check "it ran 2 ranks" grep -q "resnet20, .* 2 ranks" quickstart.log
top1=$(grep '"top1"' "$out_dir/metrics.jsonl" 2>/dev/null | tail -1 | sed -n 's/.*"top1": *\([0-9.]*\).*/\1/p')
check "it wrote an evaluation to metrics.jsonl (top1 $top1) and model.safetensors" \
	test -n "$top1" -a -s "$out_dir/model.safetensors"
# metrics.jsonl's top1 is in percent; one epoch reaches ~88 %.
check "the test accuracy after one epoch is >= 80 % (top1 $top1)" \
	awk -v t="${top1:-0}" 'BEGIN { exit !(t >= 80) }'
cluster_stop; cluster_up=

# ---- RPM -----------------------------------------------------------------------
step "rpmbuild -tb $(basename "$tarball") (Debian's Slurm; BuildRequires not checked: --nodeps)"
mkdir -p rpm
# _docdir_fmt as RHEL sets it (Debian's rpm puts the version in doc dirs).
if ! rpmbuild -tb --nodeps --define "_topdir $work/rpm" --define "_smp_mflags -j2" \
	--define '_docdir_fmt %%{NAME}' "$tarball" >rpm-build.log 2>&1; then
	tail -40 rpm-build.log
	stop "rpmbuild -tb failed"
fi
ok "rpmbuild -tb built the RPMs from the make dist tarball"
rpm_rt=$(ls "$work"/rpm/RPMS/*/dljob-"$version"-1*.rpm 2>/dev/null | grep -v debug | head -1)
rpm_pl=$(ls "$work"/rpm/RPMS/*/slurm-spank-dljob-"$version"-1*.rpm 2>/dev/null | grep -v debug | head -1)
[ -n "$rpm_rt" ] && [ -n "$rpm_pl" ] || stop "no dljob and slurm-spank-dljob RPMs: $(find rpm/RPMS -name '*.rpm')"
# Without what rpm's policy adds or changes (build-id links, compressed man
# pages on RHEL but not with Debian's rpm).
rpm_files() { rpm -qlp "$1" 2>/dev/null | grep -v '^/usr/lib/\.build-id' | sed 's/\.gz$//' | sort; }
same_list "the dljob RPM holds the runtime, dljob(1) and its sub-command pages, README and LICENSE" \
	"$(printf '%s\n' /usr/bin/dljob /usr/share/doc/dljob /usr/share/doc/dljob/README.md \
		/usr/share/licenses/dljob /usr/share/licenses/dljob/LICENSE /usr/share/man/man1/dljob.1 \
		/usr/share/man/man1/dljob-pack.1 /usr/share/man/man1/dljob-topo.1 /usr/share/man/man1/dljob-plan.1 /usr/share/man/man1/dljob-report.1 \
		/usr/share/man/man1/dljob-eval.1 | sort)" \
	"$(rpm_files "$rpm_rt")"
same_list "the slurm-spank-dljob RPM holds dljob.so in Slurm's plugin dir, the snippet and spank-dljob(8)" \
	"$(printf '%s\n' /usr/lib64/slurm/dljob.so /etc/slurm/plugstack.conf.d /etc/slurm/plugstack.conf.d/dljob.conf \
		/usr/share/man/man8/spank-dljob.8 | sort)" \
	"$(rpm_files "$rpm_pl")"
req=$(rpm -qp --requires "$rpm_pl" 2>/dev/null)
check "the plugin RPM requires slurm = $slurm_up: $(grep slurm <<<"$req" | tr '\n' ' ')" \
	grep -q -x "slurm = $slurm_up" <<<"$req"
check "the plugin RPM requires the runtime of the same build" grep -q -x "dljob(x86-64) = $version-1" <<<"$req"
check "the snippet is %config(noreplace)" \
	bash -c "rpm -qp --configfiles '$rpm_pl' 2>/dev/null | grep -qx /etc/slurm/plugstack.conf.d/dljob.conf"
mkdir -p rpmroot && (cd rpmroot && rpm2cpio "$rpm_pl" | cpio -idm --quiet && rpm2cpio "$rpm_rt" | cpio -idm --quiet) ||
	stop "cannot unpack $rpm_pl and $rpm_rt"
check "the RPMs' dljob.so and dljob are hardened (tests/test_hardening.sh)" \
	env DLJOB_SPANK=rpmroot/usr/lib64/slurm/dljob.so DLJOB_BIN=rpmroot/usr/bin/dljob bash "$src/tests/test_hardening.sh"
check "the RPM's snippet is disabled and names /usr/lib64/slurm/dljob.so and runtime=/usr/bin/dljob" \
	bash -c "! grep -q -v -E '^[[:space:]]*(#|\$)' rpmroot/etc/slurm/plugstack.conf.d/dljob.conf &&
		grep -q '^#required /usr/lib64/slurm/dljob.so runtime=/usr/bin/dljob ' rpmroot/etc/slurm/plugstack.conf.d/dljob.conf"
