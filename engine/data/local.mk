# engine/data/: datasets and the batch loader.
engine_data_libdldata_la_SOURCES += engine/data/internal.h engine/data/cpus.c engine/data/dataset.c \
	engine/data/fashion_mnist.c engine/data/synthetic.c engine/data/loader.c \
	engine/data/imagefolder.c engine/data/shards.c \
	engine/data/image.h engine/data/image.c engine/data/transform.c engine/data/jpeg.c engine/data/png.c \
	engine/data/shards.h engine/data/pack.h engine/data/pack.c
engine_data_libdldata_la_CFLAGS = $(AM_CFLAGS) $(PNG_CFLAGS) $(ZLIB_CFLAGS)
engine_data_libdldata_la_LIBADD = $(JPEG_LIBS) $(PNG_LIBS) $(ZLIB_LIBS)
