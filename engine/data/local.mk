# engine/data/: datasets and the batch loader.
engine_data_libdldata_la_SOURCES += engine/data/placeholder.c
engine_data_libdldata_la_CFLAGS = $(AM_CFLAGS) $(PNG_CFLAGS) $(ZLIB_CFLAGS)
engine_data_libdldata_la_LIBADD = $(JPEG_LIBS) $(PNG_LIBS) $(ZLIB_LIBS)
