/* PNG decoding with libpng's classic API, converted the way PIL's
 * Image.convert("RGB") does it: palette expanded, gray replicated, alpha
 * dropped (not composited), 16-bit reduced to its high byte -- but for
 * 16-bit gray, which PIL opens as mode "I" and clips to 255 (nearly white):
 * dljob keeps the high byte there too (doc/training.md, Data).
 *
 * Only the chunks that make the pixels are read (IHDR, PLTE, tRNS, IDAT);
 * the other ancillary chunks are skipped without being inflated: libpng
 * would inflate up to 1000 zTXt/iTXt chunks of up to 8 MB each (twice: size,
 * then data), a minute of CPU for a 7.7 MB file. */
#include "config.h"
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <png.h>
#include "engine/data/image.h"
#include "engine/data/internal.h"

struct png_src {
	const uint8_t *buf;
	size_t len, pos;
	char msg[256];
};

static void png_read_mem(png_structp png, png_bytep out, png_size_t n)
{
	struct png_src *s = png_get_io_ptr(png);
	if (n > s->len - s->pos)
		png_error(png, "truncated PNG (read past the end of the file)");
	memcpy(out, s->buf + s->pos, n);
	s->pos += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
	struct png_src *s = png_get_error_ptr(png);
	snprintf(s->msg, sizeof s->msg, "%s", msg);
	png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg; // benign (ancillary chunk issues); errors go to png_on_error
}

size_t dl_png_full_need(const uint8_t *buf, size_t len, int *w, int *h)
{
	*w = *h = 0;
	if (len < 24 || memcmp(buf + 12, "IHDR", 4) != 0)
		return 0;
	uint32_t iw = (uint32_t)buf[16] << 24 | (uint32_t)buf[17] << 16 | (uint32_t)buf[18] << 8 | buf[19];
	uint32_t ih = (uint32_t)buf[20] << 24 | (uint32_t)buf[21] << 16 | (uint32_t)buf[22] << 8 | buf[23];
	if (iw == 0 || ih == 0 || iw > DL_IMAGE_MAX_SIDE || ih > DL_IMAGE_MAX_SIDE ||
	    (unsigned long long)iw * ih > DL_IMAGE_MAX_PIXELS)
		return 0; // refused by dl_png_decode
	*w = (int)iw;
	*h = (int)ih;
	/* the RGB rows and their pointers; libpng's row buffers (two rows of up
	 * to 8 bytes a pixel, 16-bit RGBA) and inflate state */
	return 3 * (size_t)iw * ih + sizeof(png_bytep) * ih + 32 * (size_t)iw + ((size_t)1 << 20);
}

size_t dl_png_need(const uint8_t *buf, size_t len, int size, int train, uint64_t aug_seed)
{
	struct dl_resize_plan plan;
	int w, h, x0, y0, x1, y1;
	size_t need = dl_png_full_need(buf, len, &w, &h);

	if (!need)
		return 0;
	dl_plan_make(&plan, w, h, size, train, aug_seed);
	dl_plan_region(&plan, w, h, &x0, &y0, &x1, &y1);
	return need + dl_resample_need(y1 - y0, x1 - x0, w, h, size);
}

int dl_png_decode(const uint8_t *buf, size_t len, struct dl_pixels *px, char *err, size_t errlen)
{
	struct png_src src = {buf, len, 0, ""};
	png_structp png = NULL;
	png_infop info = NULL;
	uint8_t *volatile rgb = NULL;
	png_bytep *volatile rows = NULL;
	volatile int rv = -1;

	memset(px, 0, sizeof *px);
	png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
	if (!png || !(info = png_create_info_struct(png))) {
		dl_errf(err, errlen, "out of memory for the PNG decoder");
		goto out;
	}
	if (setjmp(png_jmpbuf(png))) {
		dl_errf(err, errlen, "corrupt PNG: %s", src.msg);
		goto out;
	}
	png_set_read_fn(png, &src, png_read_mem);
	/* the ancillary chunks libpng knows, but tRNS: none changes the RGB
	 * pixels as PIL's convert("RGB") makes them (no gamma, no profile) */
	static const png_byte skip[] = "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0"
	                               "sBIT\0sCAL\0sPLT\0sRGB\0tEXt\0tIME\0zTXt";
	png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, skip, (int)(sizeof skip / 5));
	png_read_info(png, info);
	png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
	if (w == 0 || h == 0 || w > DL_IMAGE_MAX_SIDE || h > DL_IMAGE_MAX_SIDE ||
	    (unsigned long long)w * h > DL_IMAGE_MAX_PIXELS) {
		dl_errf(err, errlen, "absurd image dimensions %ux%u (limit %d per side, %llu pixels)", w, h,
		        DL_IMAGE_MAX_SIDE, DL_IMAGE_MAX_PIXELS);
		goto out;
	}
	int ct = png_get_color_type(png, info);
	png_set_expand(png);     // palette -> RGB, gray < 8 bit -> 8 bit, tRNS -> alpha
	png_set_strip_16(png);   // high byte, as PIL
	png_set_strip_alpha(png);
	if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA)
		png_set_gray_to_rgb(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8) {
		dl_errf(err, errlen, "%s:%d: PNG transforms gave %d channels of %d bits", __FILE__, __LINE__,
		        png_get_channels(png, info), png_get_bit_depth(png, info));
		goto out;
	}
	size_t stride = png_get_rowbytes(png, info);
	rgb = malloc(stride * h);
	rows = malloc(sizeof(png_bytep) * h);
	if (!rgb || !rows) {
		dl_errf(err, errlen, "out of memory for %ux%u pixels", w, h);
		goto out;
	}
	for (png_uint_32 y = 0; y < h; y++)
		rows[y] = rgb + y * stride;
	png_read_image(png, rows);
	/* The end (IEND, CRCs of the last chunks) is not needed for the pixels. */
	px->rgb = rgb;
	px->x0 = px->y0 = 0;
	px->w = px->full_w = (int)w;
	px->h = px->full_h = (int)h;
	px->stride = stride;
	rgb = NULL;
	rv = 0;
out:
	png_destroy_read_struct(&png, &info, NULL);
	free(rows);
	free(rgb);
	return rv;
}
