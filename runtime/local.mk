# runtime/: the dljob executable (options, engine driver) and its
# subcommands.  It links common/, mapping/ (for `dljob topo`) and world/
# (world/local.mk adds those sources).
dljob_SOURCES += runtime/main.c runtime/cli.h runtime/cli.c runtime/opttab.h runtime/opttab.c \
	runtime/eval.h runtime/eval.c runtime/pack.h runtime/pack.c $(DLJOB_COMMON_SOURCES)
dljob_SOURCES += runtime/topo.h runtime/topo.c $(DLJOB_MAPPING_SOURCES)
# dljob report and the run plot
dljob_SOURCES += runtime/report.h runtime/report.c runtime/plot.h runtime/plot.c
# dljob plan: the device memory a training step plans (engine/memplan.h)
dljob_SOURCES += runtime/plan.h runtime/plan.c
dljob_CPPFLAGS = $(AM_CPPFLAGS) $(HARDEN_CPPFLAGS)
dljob_CFLAGS = $(AM_CFLAGS) $(HARDEN_CFLAGS) $(OPENMP_CFLAGS) $(PMIX_CFLAGS) $(MPI_CFLAGS) $(HWLOC_CFLAGS) \
	$(CAIRO_CFLAGS) $(JANSSON_CFLAGS)
dljob_LDADD += $(PMIX_LIBS) $(MPI_LIBS) $(HWLOC_LIBS) $(CAIRO_LIBS) $(JANSSON_LIBS)
# RUNPATH first $ORIGIN/../lib/dljob: a relocatable install (make
# install-relocatable) keeps the runtime's libraries there, beside it.
dljob_LDFLAGS = -Wl,-rpath,'$$ORIGIN/../lib/dljob' -Wl,--enable-new-dtags $(OPENMP_CFLAGS) $(HARDEN_LDFLAGS)

# make install-relocatable [DESTDIR=D] [prefix=P]: the runtime and every
# library it needs that is not glibc's (or the CUDA toolkit's, which GPU
# images and the driver provide) copied into P/lib/dljob, found there
# through the RUNPATH above; each copy's own RUNPATH becomes $ORIGIN
# (patchelf), since a RUNPATH serves only its own object's DT_NEEDED (and
# Debian's libmpi has one of its own).  The installation can then be
# mounted into a container image that lacks those libraries (doc/containers.md);
# the CUDA module (pkglibdir, the same directory) comes along,
# its CUDA libraries not (the image or the driver has them).  Open MPI and PMIx still load their own plugins from their
# installed paths (only the PMIx world needs them).
RELOCATABLE_SKIP = libc.so.* libm.so.* libdl.so.* librt.so.* libpthread.so.* libresolv.so.* ld-linux*
install-relocatable: install-binPROGRAMS install-pkglibLTLIBRARIES
	@dir='$(DESTDIR)$(libdir)/dljob'; bin='$(DESTDIR)$(bindir)/dljob'; \
	mkdir -p "$$dir" || exit 1; \
	libs=$$(ldd "$$bin" | awk '$$2 == "=>" && $$3 ~ /^\// {print $$3}') || exit 1; \
	for lib in $$libs; do \
	  base=$${lib##*/}; skip=; \
	  for pat in $(RELOCATABLE_SKIP); do case "$$base" in $$pat) skip=1;; esac; done; \
	  case "$$lib" in /usr/local/cuda*|$(CUDA_DIR)/*) skip=1;; esac; \
	  test -n "$$skip" && continue; \
	  cp -L "$$lib" "$$dir/$$base" && chmod u+w "$$dir/$$base" && \
	  patchelf --set-rpath '$$ORIGIN' "$$dir/$$base" || { echo "install-relocatable: $$lib (patchelf: contrib/install-deps.sh)"; exit 1; }; \
	done; \
	echo "install-relocatable: $$bin with $$(ls "$$dir" | wc -l) libraries in $$dir"
.PHONY: install-relocatable
