# make check-slurm-current: dljob against a current Slurm release as well as
# Debian 12's 22.05.  tests/current/build-slurm.sh builds Slurm (Debian's
# source tarball of 24.11, checksum-verified; DLJOB_SLURM_VERSION picks
# another release, see there) once into
# $(SLURM_CURRENT_CACHE), outside the clone; a second dljob build in
# $(SLURM_CURRENT_BUILDDIR)/ (below this build dir, configured like it plus
# --with-slurm=that prefix, without CUDA) builds dljob.so against it, and
# the cluster tests below run on a private cluster of that Slurm
# (DLJOB_SLURM_PREFIX, tests/cluster/cluster.sh).  DLJOB_OTHER_SPANK is this
# build's own dljob.so (built for the other Slurm release), for
# tests/current/test_slurm_release.sh.  Ends with
# 'check-slurm-current: N passed, N failed' and leaves the counts in
# $(SLURM_CURRENT_BUILDDIR)/check-slurm-current.result for .ci/run.
SLURM_CURRENT_CACHE = /var/cache/dljob
SLURM_CURRENT_BUILDDIR = _slurm-current
# On a 2-CPU node Slurm 24.11 does not overcommit a job whose -O comes with
# a per-task TRES (-c, --gpus-per-task): it refuses it ("Requested node
# configuration is not available") or keeps it pending for Resources
# forever; 22.05 overcommits.  test_spank_bind.sh and test_spank_gpus.sh
# make such requests as steps of an allocation, which both allow.
SLURM_CURRENT_TESTS = tests/current/test_slurm_release.sh tests/cluster/test_cluster.sh \
	tests/slurm/test_spank_options.sh tests/slurm/test_spank_env.sh tests/slurm/test_spank_model.sh \
	tests/slurm/test_spank_setup.sh tests/slurm/test_spank_sbatch.sh \
	tests/slurm/test_spank_train.sh tests/slurm/test_world_pmix.sh tests/slurm/test_spank_container.sh \
	tests/slurm/test_spank_paths.sh tests/cluster/test_netns.sh tests/slurm/test_spank_cpuset.sh \
	tests/slurm/test_spank_bind.sh tests/slurm/test_spank_gpus.sh tests/slurm/test_spank_misconf.sh \
	tests/slurm/test_world_fail.sh tests/train/test_resume_slurm.sh
SLURM_CURRENT_TOOLS = dljob dljob.la tests/slurm/marker_spank.la tests/slurm/container_spank.la world/test/world_check \
	tests/slurm/needs_lib tests/slurm/libmpihang.la
EXTRA_DIST += tests/current/build-slurm.sh tests/current/test_slurm_release.sh
TESTS += tests/current/test_slurm_release.sh
dist_check_SCRIPTS += tests/current/test_slurm_release.sh

check-slurm-current:
	@res=$(abs_top_builddir)/$(SLURM_CURRENT_BUILDDIR)/check-slurm-current.result; \
	if test "$(abs_top_srcdir)" = "$(abs_top_builddir)"; then \
	  echo "check-slurm-current: needs an out-of-tree build (e.g. _build/, as README says)"; \
	  echo "check-slurm-current: 0 passed, 1 failed"; exit 1; fi; \
	mkdir -p $(SLURM_CURRENT_BUILDDIR) && rm -f "$$res" && \
	echo "=== check-slurm-current: Slurm ($$(date +%T))" && \
	if ! prefix=$$($(abs_top_srcdir)/tests/current/build-slurm.sh '$(SLURM_CURRENT_CACHE)'); then \
	  echo "check-slurm-current: 0 passed, 1 failed"; echo "0 1" >"$$res"; exit 1; fi; \
	head -1 "$$prefix/.dljob-built"; \
	cd $(SLURM_CURRENT_BUILDDIR) && \
	if test ! -f Makefile || ! grep -qx "SLURM_PREFIX = $$prefix" Makefile; then \
	  echo "check-slurm-current: configuring $(SLURM_CURRENT_BUILDDIR)/ --with-slurm=$$prefix"; \
	  eval "set -- $$($(abs_top_builddir)/config.status --config)"; \
	  $(abs_top_srcdir)/configure -q "$$@" --with-slurm="$$prefix" --without-cuda \
	    >configure.out 2>&1 || { cat configure.out; echo "check-slurm-current: 0 passed, 1 failed"; echo "0 1" >"$$res"; exit 1; }; \
	fi && \
	$(MAKE) $(AM_MAKEFLAGS) slurm-current-run DLJOB_OTHER_SPANK='$(abs_top_builddir)/.libs/dljob.so'

# Run inside $(SLURM_CURRENT_BUILDDIR) by check-slurm-current (generated
# sources such as engine/tfevent.pb-c.h first: only make all builds them).
slurm-current-run:
	@pass=0; fail=0; \
	echo "=== check-slurm-current: build against Slurm $$(sed -n 's/^SLURM_PREFIX = //p' Makefile) ($$(date +%T))"; \
	if ! $(MAKE) $(AM_MAKEFLAGS) $(BUILT_SOURCES) $(SLURM_CURRENT_TOOLS) >slurm-current-make.log 2>&1; then \
	  tail -40 slurm-current-make.log; echo "check-slurm-current: 0 passed, 1 failed"; echo "0 1" >check-slurm-current.result; exit 1; fi; \
	echo "=== check-slurm-current: cluster tests ($$(date +%T))"; \
	DLJOB_OTHER_SPANK='$(DLJOB_OTHER_SPANK)' \
	  $(MAKE) $(AM_MAKEFLAGS) check-TESTS TESTS='$(SLURM_CURRENT_TESTS)' check_PROGRAMS= check_LTLIBRARIES=; \
	for t in $(SLURM_CURRENT_TESTS); do \
	  if grep -q -E '^:test-result: (FAIL|ERROR)' "$${t%.sh}.trs" 2>/dev/null; then \
	    echo "--- $${t%.sh}.log"; tail -40 "$${t%.sh}.log"; fi; \
	done; \
	if test -f test-suite.log; then \
	  p=$$(sed -n 's/^# PASS: *//p' test-suite.log); f=$$(sed -n 's/^# FAIL: *//p' test-suite.log); \
	  x=$$(sed -n 's/^# XPASS: *//p' test-suite.log); e=$$(sed -n 's/^# ERROR: *//p' test-suite.log); \
	  pass=$$((pass + $${p:-0})); fail=$$((fail + $${f:-0} + $${x:-0} + $${e:-0})); \
	else echo "FAIL: the tests did not run"; fail=$$((fail + 1)); fi; \
	echo "$$pass $$fail" >check-slurm-current.result; \
	echo "check-slurm-current: $$pass passed, $$fail failed"; test $$fail -eq 0
.PHONY: check-slurm-current slurm-current-run
