dist_man_MANS += man/spank-dljob.8
DLJOB_RUNTIME_MANS = man/dljob.1 man/dljob-pack.1 man/dljob-topo.1 man/dljob-plan.1 man/dljob-report.1 \
	man/dljob-eval.1
if BUILD_RUNTIME
dist_man_MANS += $(DLJOB_RUNTIME_MANS)
else
EXTRA_DIST += $(DLJOB_RUNTIME_MANS)
endif
