dist_man_MANS += man/dljob.1 man/dljob-pack.1 man/dljob-topo.1 man/dljob-plan.1 man/dljob-report.1 \
	man/dljob-eval.1 man/spank-dljob.8
