# make check-cgroup2: dljob on a pure cgroup v2 node, a Debian 12 VM under
# qemu's TCG with systemd as init and a one-node cluster (task/cgroup on
# cgroup/v2, ConstrainCores and ConstrainDevices), dljob installed from
# the .debs built from the make dist tarball (tests/cgroup2/).  Not part of
# make check: it needs root, qemu and (once) debootstrap from the mirror;
# the node image is cached in /var/cache/dljob/cgroup2.  Ends with
# 'check-cgroup2: N passed, N failed' and writes "N N" to
# check-cgroup2.result.
EXTRA_DIST += tests/cgroup2/check_cgroup2.sh tests/cgroup2/mkimage.sh \
	tests/cgroup2/guest.sh tests/cgroup2/dljob-cgroup2.service
check-cgroup2:
	@rm -f check-cgroup2.result; \
	echo "=== check-cgroup2: make dist ($$(date +%T))"; \
	if ! $(MAKE) $(AM_MAKEFLAGS) dist-gzip >check-cgroup2-dist.log 2>&1; then \
	  tail -30 check-cgroup2-dist.log; echo "0 1" >check-cgroup2.result; \
	  echo "check-cgroup2: 0 passed, 1 failed"; exit 1; fi; \
	$(BASH) $(top_srcdir)/tests/cgroup2/check_cgroup2.sh \
	  $(abs_top_builddir)/$(PACKAGE)-$(VERSION).tar.gz $(abs_top_builddir)/check-cgroup2.result
.PHONY: check-cgroup2
CLEANFILES += check-cgroup2.result check-cgroup2-dist.log
