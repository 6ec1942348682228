dist_man_MANS += man/dljob.1 man/spank-dljob.8
