int dl_engine_placeholder(void); int dl_engine_placeholder(void) { return 0; }
