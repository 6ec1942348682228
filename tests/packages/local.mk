# make check-packages: the Debian packages and the RPMs, built from the make
# dist tarball, checked, the .debs installed and the README quick-start job
# run on the private cluster with the installed plugin and runtime, then
# purged (tests/packages/check_packages.sh).  Not part of make check: it
# installs packages system-wide.  Ends with 'check-packages: N passed, N
# failed' and writes "N N" to check-packages.result.
EXTRA_DIST += tests/packages/check_packages.sh
check-packages:
	@rm -f check-packages.result; \
	echo "=== check-packages: make dist ($$(date +%T))"; \
	if ! $(MAKE) $(AM_MAKEFLAGS) dist-gzip >check-packages-dist.log 2>&1; then \
	  tail -30 check-packages-dist.log; echo "0 1" >check-packages.result; \
	  echo "check-packages: 0 passed, 1 failed"; exit 1; fi; \
	$(BASH) $(top_srcdir)/tests/packages/check_packages.sh \
	  $(abs_top_builddir)/$(PACKAGE)-$(VERSION).tar.gz $(abs_top_builddir)/check-packages.result
.PHONY: check-packages
CLEANFILES += check-packages.result check-packages-dist.log
# configure --disable-runtime builds and installs the plugin alone, with no
# library of the runtime's (in a scratch directory, ~30 s).
TESTS += tests/packages/test_plugin_only.sh
dist_check_SCRIPTS += tests/packages/test_plugin_only.sh
