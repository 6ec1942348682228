EXTRA_DIST += contrib/install-deps.sh contrib/plugstack.conf.d/dljob.conf.in
EXTRA_DIST += contrib/quickstart.sh contrib/sbatch

# The plugstack.conf.d snippet, with this build's paths of dljob.so and
# dljob, installed DISABLED (its one "required" line is a comment) into
# $(plugstackdir): /etc/slurm/plugstack.conf.d with --sysconfdir=/etc, as
# the Debian and RPM packages build it.
plugstackdir = $(sysconfdir)/slurm/plugstack.conf.d
plugstack_DATA = contrib/plugstack.conf.d/dljob.conf
CLEANFILES += contrib/plugstack.conf.d/dljob.conf
contrib/plugstack.conf.d/dljob.conf: $(top_srcdir)/contrib/plugstack.conf.d/dljob.conf.in Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib/plugstack.conf.d && \
	sed -e 's|@slurm_plugindir[@]|$(slurm_plugindir)|g' -e 's|@bindir[@]|$(bindir)|g' \
	  $(top_srcdir)/contrib/plugstack.conf.d/dljob.conf.in >$@.tmp && mv -f $@.tmp $@

# Packaging: debian/ (dpkg-buildpackage) and the RPM spec (rpmbuild -ta on
# the make dist tarball) travel in the tarball.
EXTRA_DIST += debian/changelog debian/control debian/copyright debian/rules \
	debian/source/format debian/dljob.install debian/dljob.docs \
	debian/slurm-spank-dljob.install
EXTRA_DIST += dljob.spec.in dljob.spec
