int dl_data_placeholder(void); int dl_data_placeholder(void) { return 0; }
