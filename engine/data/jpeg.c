/* JPEG decoding with libjpeg-turbo: baseline, progressive, grayscale (to RGB),
 * CMYK/YCCK (to RGB like PIL, Adobe's inverted CMYK included).  Errors and
 * the warnings that mean the data ended early longjmp back to us, so a bad
 * file is a returned error, never an exit.
 *
 * Progressive files: libjpeg only warns about a scan that repeats an earlier
 * one, and every scan walks the whole image, so the scans are limited as
 * TurboJPEG's TJPARAM_SCANLIMIT and djpeg -maxscans do: without the limit
 * a small file of many repeated scans of a large image costs seconds of
 * decoding, with it one is refused early (tests/bench/RESULTS.md,
 * "Figures the data loader's comments held").  Real files have at most a
 * few dozen.
 *
 * Memory: a file of several scans (progressive, or components in separate
 * scans) makes libjpeg keep every DCT coefficient of the image, 128 bytes a
 * block per component (800 MB for a 100-megapixel CMYK file) besides the
 * decoded rows.  lib_bound says how much libjpeg may take for a file, and
 * decode holds it to that (max_memory_to_use: past it, libjpeg fails with
 * "Backing store not supported" instead of allocating); dl_jpeg_need adds
 * the decoded rows and the resampler's, for the loader's decode budget. */
#include "config.h"
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>
#include "engine/data/image.h"
#include "engine/data/internal.h"

#define MAX_SCANS 500

struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
	struct jpeg_progress_mgr progress; // decoding only: the scan limit
};

static void on_error(j_common_ptr cinfo)
{
	struct jerr *e = (struct jerr *)cinfo->err;
	(*cinfo->err->format_message)(cinfo, e->msg);
	longjmp(e->jb, 1);
}

/* Warnings: "premature end" (of the file or of a data segment) leaves grey
 * or garbage pixels behind -- a bad sample, like PIL's "image file is
 * truncated".  Other warnings (extraneous bytes, ...) are harmless. */
static void on_message(j_common_ptr cinfo, int level)
{
	struct jerr *e = (struct jerr *)cinfo->err;
	if (level < 0 && (cinfo->err->msg_code == JWRN_JPEG_EOF || cinfo->err->msg_code == JWRN_HIT_MARKER)) {
		(*cinfo->err->format_message)(cinfo, e->msg);
		longjmp(e->jb, 1);
	}
}

/* Called once per iMCU row while the scans are read (jpeg_start_decompress
 * reads all of a progressive file's scans) and while rows are output. */
static void on_progress(j_common_ptr cinfo)
{
	struct jerr *e = (struct jerr *)cinfo->err;
	int scan = ((j_decompress_ptr)cinfo)->input_scan_number;
	if (scan > MAX_SCANS) {
		snprintf(e->msg, sizeof e->msg, "more than %d scans", MAX_SCANS);
		longjmp(e->jb, 1);
	}
}

/* A JPEG ends with the EOI marker (FF D9), maybe followed by padding or a
 * vendor trailer (phones append tens of KB); a file cut short has none after
 * its scan data.  Checking this up front makes a truncated file bad whatever
 * part of it a random crop would decode.  (An EXIF thumbnail's EOI can hide
 * a truncation; then the decoder's premature-end warning still catches it
 * when the crop reaches the missing part.) */
static int has_eoi(const uint8_t *buf, size_t len)
{
	for (size_t i = len - 1; i > 0; i--)
		if (buf[i] == 0xd9 && buf[i - 1] == 0xff)
			return 1;
	return 0;
}

static int check_dims(unsigned w, unsigned h, char *err, size_t errlen)
{
	if (w == 0 || h == 0 || w > DL_IMAGE_MAX_SIDE || h > DL_IMAGE_MAX_SIDE ||
	    (unsigned long long)w * h > DL_IMAGE_MAX_PIXELS) {
		dl_errf(err, errlen, "absurd image dimensions %ux%u (limit %d per side, %llu pixels)", w, h,
		        DL_IMAGE_MAX_SIDE, DL_IMAGE_MAX_PIXELS);
		return -1;
	}
	return 0;
}

/* PIL's cmyk2rgb: R = (255-K) - C*(255-K)/255, with its MULDIV255 rounding.
 * Adobe's files store the channels inverted. */
static inline uint8_t muldiv255(unsigned a, unsigned b)
{
	unsigned t = a * b + 128;
	return (uint8_t)(((t >> 8) + t) >> 8);
}

static void cmyk_row_to_rgb(uint8_t *row, int w, int inverted)
{
	for (int x = 0; x < w; x++) {
		unsigned c = row[4 * x], m = row[4 * x + 1], yy = row[4 * x + 2], k = row[4 * x + 3];
		if (!inverted) {
			c = 255 - c;
			m = 255 - m;
			yy = 255 - yy;
			k = 255 - k;
		}
		row[3 * x] = muldiv255(c, k);
		row[3 * x + 1] = muldiv255(m, k);
		row[3 * x + 2] = muldiv255(yy, k);
	}
}

/* Decode rows [ry0,ry1) and (at least) columns [rx0,rx1) at 1/denom scale.
 * plan (optional) is built from the header size when want_plan is set. */
struct decode_req {
	int max_short; // full decode: scale by M/8 so the short side is <= this (0: no scaling)
	int want_plan, size, train;
	uint64_t seed;
	struct dl_resize_plan *plan;
};

/* What libjpeg may allocate for cinfo, after jpeg_read_header: the whole
 * image's coefficients when it has several scans (jdcoefct.c, rounded up to
 * the sampling factors), plus row buffers (jdmainct.c, jdsample.c: a few
 * iMCU rows of every component, wide as the image) and fixed tables. */
static size_t lib_bound(const struct jpeg_decompress_struct *c)
{
	size_t coef = 0, width = (size_t)c->image_width + 64;
	if (c->progressive_mode || c->comps_in_scan < c->num_components)
		for (int i = 0; i < c->num_components; i++) {
			const jpeg_component_info *ci = &c->comp_info[i];
			coef += ((size_t)ci->width_in_blocks + (size_t)ci->h_samp_factor) *
			        ((size_t)ci->height_in_blocks + (size_t)ci->v_samp_factor) * DCTSIZE2 * sizeof(JCOEF);
		}
	return coef + ((size_t)4 << 20) + 4 * DCTSIZE * width * (size_t)c->num_components * (size_t)c->max_v_samp_factor;
}

/* From the header on: the output scale and colour space for rq (and its
 * plan).  -1 with err for absurd dimensions; libjpeg's errors longjmp. */
static int configure(struct jpeg_decompress_struct *cinfo, struct decode_req *rq, int *cmyk, char *err,
                     size_t errlen)
{
	jpeg_read_header(cinfo, TRUE);
	if (check_dims(cinfo->image_width, cinfo->image_height, err, errlen) != 0)
		return -1;
	int w = (int)cinfo->image_width, h = (int)cinfo->image_height, denom = 1, num = 1;
	if (rq->want_plan) {
		dl_plan_make(rq->plan, w, h, rq->size, rq->train, rq->seed);
		denom = dl_plan_scale_denom(rq->plan);
	} else if (rq->max_short > 0 && (w < h ? w : h) > rq->max_short) {
		/* libjpeg-turbo scales by M/8, M = 1..16, in the DCT domain */
		int s = w < h ? w : h;
		denom = 8;
		num = (int)((8LL * rq->max_short) / s);
		if (num < 1)
			num = 1;
	}
	*cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
	cinfo->out_color_space = *cmyk ? JCS_CMYK : JCS_RGB;
	cinfo->scale_num = (unsigned)num;
	cinfo->scale_denom = (unsigned)denom;
	/* Training crops are random anyway: merged (non-fancy) chroma
	 * upsampling saves instructions there.  The fast IDCT saves nothing
	 * measurable with libjpeg-turbo's SIMD and is visibly less accurate at
	 * high quality, so it is not used (tests/bench/RESULTS.md, "Figures the
	 * data loader's comments held").  Eval matches PIL. */
	cinfo->dct_method = JDCT_ISLOW;
	cinfo->do_fancy_upsampling = rq->want_plan && rq->train ? FALSE : TRUE;
	cinfo->mem->max_memory_to_use = (long)lib_bound(cinfo);
	return 0;
}

/* The output rows [*ry0,*ry1) and columns [*rx0,*rx1) rq needs, once the
 * output size is known (rq->plan rescaled to it). */
static void out_region(const struct jpeg_decompress_struct *cinfo, struct decode_req *rq, int *rx0, int *ry0,
                       int *rx1, int *ry1)
{
	int sw = (int)cinfo->output_width, sh = (int)cinfo->output_height;
	*rx0 = *ry0 = 0;
	*rx1 = sw;
	*ry1 = sh;
	if (rq->want_plan) {
		if (cinfo->scale_num != cinfo->scale_denom)
			dl_plan_rescale(rq->plan, (int)cinfo->image_width, (int)cinfo->image_height, sw, sh);
		dl_plan_region(rq->plan, sw, sh, rx0, ry0, rx1, ry1);
	}
}

static int decode(const uint8_t *buf, size_t len, struct decode_req *rq, struct dl_pixels *px,
                  char *err, size_t errlen)
{
	struct jpeg_decompress_struct cinfo;
	struct jerr je;
	uint8_t *volatile rgb = NULL;
	volatile int rv = -1;
	int cmyk;

	memset(px, 0, sizeof *px);
	if (len < 4 || !has_eoi(buf, len)) {
		dl_errf(err, errlen, "truncated JPEG (no end-of-image marker)");
		return -1;
	}
	cinfo.err = jpeg_std_error(&je.pub);
	je.pub.error_exit = on_error;
	je.pub.emit_message = on_message;
	if (setjmp(je.jb)) {
		dl_errf(err, errlen, "corrupt JPEG: %s", je.msg);
		goto out;
	}
	jpeg_create_decompress(&cinfo);
	je.progress.progress_monitor = on_progress;
	cinfo.progress = &je.progress;
	jpeg_mem_src(&cinfo, buf, (unsigned long)len);
	if (configure(&cinfo, rq, &cmyk, err, errlen) != 0)
		goto out;
	jpeg_start_decompress(&cinfo);
	int sw = (int)cinfo.output_width, sh = (int)cinfo.output_height, rx0, ry0, rx1, ry1;
	out_region(&cinfo, rq, &rx0, &ry0, &rx1, &ry1);
	JDIMENSION xoff = (JDIMENSION)rx0, cw = (JDIMENSION)(rx1 - rx0);
	if (cw < (JDIMENSION)sw)
		jpeg_crop_scanline(&cinfo, &xoff, &cw); // widens to iMCU boundaries
	int ncomp = cmyk ? 4 : 3;
	size_t stride = (size_t)cw * (size_t)ncomp;
	rgb = malloc(stride * (size_t)(ry1 - ry0) + 1);
	if (!rgb) {
		dl_errf(err, errlen, "out of memory for %ux%d pixels", cw, ry1 - ry0);
		goto out;
	}
	if (ry0 > 0 && jpeg_skip_scanlines(&cinfo, (JDIMENSION)ry0) != (JDIMENSION)ry0) {
		dl_errf(err, errlen, "corrupt JPEG: could not skip to row %d", ry0);
		goto out;
	}
	/* Several rows per call: the merged (h2v2) upsampler makes two rows at a
	 * time and would otherwise copy every other one through a spare row. */
	while ((int)cinfo.output_scanline < ry1) {
		JSAMPROW rows[16];
		int first = (int)cinfo.output_scanline, want = ry1 - first < 16 ? ry1 - first : 16;
		for (int i = 0; i < want; i++)
			rows[i] = rgb + (size_t)(first + i - ry0) * stride;
		JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)want);
		if (got == 0) {
			dl_errf(err, errlen, "corrupt JPEG: no data for row %u", cinfo.output_scanline);
			goto out;
		}
		for (JDIMENSION i = 0; cmyk && i < got; i++)
			cmyk_row_to_rgb(rows[i], (int)cw, cinfo.saw_Adobe_marker);
	}
	px->rgb = rgb;
	px->x0 = (int)xoff;
	px->y0 = ry0;
	px->w = (int)cw;
	px->h = ry1 - ry0;
	px->full_w = sw;
	px->full_h = sh;
	px->stride = stride; // CMYK rows were converted in place: RGB in the first 3/4
	rgb = NULL;
	rv = 0;
out:
	/* We stop after the last row the transform needs; abort instead of
	 * finish (which insists on every scanline). */
	jpeg_destroy_decompress(&cinfo);
	free(rgb);
	return rv;
}

int dl_jpeg_decode_plan(const uint8_t *buf, size_t len, int size, int train, uint64_t aug_seed,
                        struct dl_resize_plan *plan, struct dl_pixels *px, char *err, size_t errlen)
{
	struct decode_req rq = {.want_plan = 1, .size = size, .train = train, .seed = aug_seed, .plan = plan};
	return decode(buf, len, &rq, px, err, errlen);
}

/* What decode allocates at most for rq (libjpeg's own memory included),
 * from the header; the resampler's need after it when rq has a plan.
 * *ow x *oh: the decoded size.  0 when the header cannot be read. */
static size_t decode_need(const uint8_t *buf, size_t len, struct decode_req *rq, int *ow, int *oh)
{
	struct jpeg_decompress_struct cinfo;
	struct jerr je;
	volatile size_t need = 0;
	int cmyk, rx0, ry0, rx1, ry1;
	char why[256];

	*ow = *oh = 0;
	if (len < 4)
		return 0;
	cinfo.err = jpeg_std_error(&je.pub);
	je.pub.error_exit = on_error;
	je.pub.emit_message = on_message;
	if (setjmp(je.jb))
		goto out; // decode says what is wrong
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, buf, (unsigned long)len);
	if (configure(&cinfo, rq, &cmyk, why, sizeof why) != 0)
		goto out;
	jpeg_calc_output_dimensions(&cinfo);
	out_region(&cinfo, rq, &rx0, &ry0, &rx1, &ry1);
	/* decode's rows: whole output lines (a crop is widened to iMCU
	 * boundaries), CMYK converted in place */
	size_t sw = cinfo.output_width, rows = (size_t)(ry1 - ry0);
	*ow = (int)sw;
	*oh = (int)cinfo.output_height;
	need = (size_t)cinfo.mem->max_memory_to_use + sw * (cmyk ? 4 : 3) * rows + 1;
	if (rq->want_plan)
		need += dl_resample_need(ry1 - ry0, rx1 - rx0, (int)sw, (int)cinfo.output_height, rq->size);
out:
	jpeg_destroy_decompress(&cinfo);
	return need;
}

size_t dl_jpeg_need(const uint8_t *buf, size_t len, int size, int train, uint64_t aug_seed)
{
	struct dl_resize_plan plan;
	struct decode_req rq = {.want_plan = 1, .size = size, .train = train, .seed = aug_seed, .plan = &plan};
	int ow, oh;
	return decode_need(buf, len, &rq, &ow, &oh);
}

size_t dl_jpeg_full_need(const uint8_t *buf, size_t len, int max_short, int *w, int *h)
{
	struct decode_req rq = {.max_short = max_short};
	return decode_need(buf, len, &rq, w, h);
}

size_t dl_jpeg_encode_need(int w, int h)
{
	/* The output: libjpeg-turbo's worst case for 4:2:0 (tj3JPEGBufSize:
	 * 3 bytes a pixel of the MCU-padded image, + 2048), in jpeg_mem_dest's
	 * buffer, which doubles when full (the old one and its copy: 3x);
	 * libjpeg's own: its tables and a few MCU rows of each component. */
	size_t pw = ((size_t)w + 15) & ~(size_t)15, ph = ((size_t)h + 15) & ~(size_t)15;
	return 3 * (3 * pw * ph + 2048) + ((size_t)4 << 20) + 4 * 16 * 3 * pw * sizeof(JSAMPLE);
}

int dl_jpeg_decode_full(const uint8_t *buf, size_t len, int max_short, struct dl_pixels *px,
                        char *err, size_t errlen)
{
	struct decode_req rq = {.max_short = max_short};
	return decode(buf, len, &rq, px, err, errlen);
}

int dl_jpeg_dims(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
	struct jpeg_decompress_struct cinfo;
	struct jerr je;
	volatile int rv = -1;

	cinfo.err = jpeg_std_error(&je.pub);
	je.pub.error_exit = on_error;
	je.pub.emit_message = on_message;
	if (setjmp(je.jb)) {
		dl_errf(err, errlen, "corrupt JPEG: %s", je.msg);
		goto out;
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, buf, (unsigned long)len);
	jpeg_read_header(&cinfo, TRUE);
	if (check_dims(cinfo.image_width, cinfo.image_height, err, errlen) != 0)
		goto out;
	*w = (int)cinfo.image_width;
	*h = (int)cinfo.image_height;
	rv = 0;
out:
	jpeg_destroy_decompress(&cinfo);
	return rv;
}

int dl_jpeg_encode(const struct dl_pixels *px, int quality, uint8_t **out, size_t *outlen,
                   char *err, size_t errlen)
{
	struct jpeg_compress_struct cinfo;
	struct jerr je;
	unsigned char *volatile mem = NULL;
	unsigned long memlen = 0;
	volatile int rv = -1;

	*out = NULL;
	cinfo.err = jpeg_std_error(&je.pub);
	je.pub.error_exit = on_error;
	if (setjmp(je.jb)) {
		dl_errf(err, errlen, "JPEG encoder: %s", je.msg);
		goto out;
	}
	jpeg_create_compress(&cinfo);
	jpeg_mem_dest(&cinfo, (unsigned char **)&mem, &memlen);
	cinfo.image_width = (JDIMENSION)px->w;
	cinfo.image_height = (JDIMENSION)px->h;
	cinfo.input_components = 3;
	cinfo.in_color_space = JCS_RGB;
	jpeg_set_defaults(&cinfo);
	jpeg_set_quality(&cinfo, quality, TRUE);
	jpeg_start_compress(&cinfo, TRUE);
	while (cinfo.next_scanline < cinfo.image_height) {
		JSAMPROW r = px->rgb + (size_t)cinfo.next_scanline * px->stride;
		jpeg_write_scanlines(&cinfo, &r, 1);
	}
	jpeg_finish_compress(&cinfo);
	*out = mem;
	*outlen = memlen;
	mem = NULL;
	rv = 0;
out:
	jpeg_destroy_compress(&cinfo);
	free(mem);
	return rv;
}
