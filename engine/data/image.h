/* Image decode + transform, internal to engine/data/.  An encoded JPEG or
 * PNG in memory becomes a normalized (3,size,size) float sample:
 *   train: RandomResizedCrop(size) + RandomHorizontalFlip, as torchvision;
 *   eval:  Resize(round(size/0.875)) + CenterCrop(size), as torchvision.
 * Only the pixels the transform needs are decoded (JPEG: rows skipped, columns
 * cropped, DCT-domain downscaling where it pays). */
#ifndef DLJOB_ENGINE_DATA_IMAGE_H
#define DLJOB_ENGINE_DATA_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Largest image we accept (the rest is "absurd dimensions": a crafted header
 * should not make us allocate gigabytes). */
#define DL_IMAGE_MAX_SIDE 32768
#define DL_IMAGE_MAX_PIXELS 100000000ull
/* Largest encoded image read: an ImageFolder file, a shard record, a file
 * dljob pack reads. */
#define DL_IMAGE_MAX_BYTES (256u << 20)

enum dl_image_format { DL_IMG_UNKNOWN = 0, DL_IMG_JPEG = 1, DL_IMG_PNG = 2 };

/* Resize the rect [x0,x1)x[y0,y1) of the source (PIL semantics: as if that
 * rect were cropped out and resized to out_w x out_h with the bilinear,
 * antialiasing filter), and keep the window (ox,oy,size,size) of the result. */
struct dl_resize_plan {
	double x0, y0, x1, y1;
	int out_w, out_h;
	int ox, oy, size;
	int flip;
};

/* A decoded region: rows [y0,y0+h) and columns [x0,x0+w) of an image that is
 * full_w x full_h, RGB8 interleaved, `stride` bytes per row. */
struct dl_pixels {
	uint8_t *rgb;
	int x0, y0, w, h, full_w, full_h;
	size_t stride;
};

enum dl_image_format dl_image_sniff(const uint8_t *buf, size_t len);

/* Fill the plan for an image of w x h (original pixels). */
void dl_plan_make(struct dl_resize_plan *p, int w, int h, int size, int train, uint64_t aug_seed);
/* DCT-domain scale denominator (1,2,4,8) worth using for this plan: only
 * when the rect's sides stay >= 2x the output after scaling (measured: below
 * that a full decode + filter is faster than scaled decode at ImageNet size). */
int dl_plan_scale_denom(const struct dl_resize_plan *p);
/* Map the plan onto an image scaled from w x h to sw x sh. */
void dl_plan_rescale(struct dl_resize_plan *p, int w, int h, int sw, int sh);
/* Source rows [*y0,*y1) and columns [*x0,*x1) the plan reads, for an image
 * of full_w x full_h. */
void dl_plan_region(const struct dl_resize_plan *p, int full_w, int full_h,
                    int *x0, int *y0, int *x1, int *y1);
/* Resample + normalize into chw (3,size,size): (x/255 - mean[c]) / std[c],
 * mean and std (3) in [0,1] pixel units (NULL: dl_imagenet_mean/std). */
int dl_resample_chw(const struct dl_pixels *px, const struct dl_resize_plan *p, const float *mean,
                    const float *std, float *chw, char *err, size_t errlen);

/* The same resampling, rounded to nearest 8-bit values, into hwc
 * (size,size,3) with no normalization: dl_resample_chw's value is
 * (hwc/255 - dl_imagenet_mean[c]) / dl_imagenet_std[c] within 0.5/255/std. */
int dl_resample_hwc8(const struct dl_pixels *px, const struct dl_resize_plan *p, uint8_t *hwc,
                     char *err, size_t errlen);
/* torchvision's ImageNet normalization, per RGB channel of x/255. */
extern const float dl_imagenet_mean[3], dl_imagenet_std[3];

/* What resample allocates at most for a plan reading rows x cols of an
 * image of full_w x full_h, into size x size. */
size_t dl_resample_need(int rows, int cols, int full_w, int full_h, int size);

/* What dl_resize_rgb8 allocates at most. */
size_t dl_resize_rgb8_need(int in_w, int in_h, int out_w, int out_h);
/* Resize a whole decoded image (x0 = y0 = 0) to out_w x out_h with the same
 * filter, RGB8 out (for dljob pack --max-side). */
int dl_resize_rgb8(const struct dl_pixels *px, int out_w, int out_h, struct dl_pixels *out,
                   char *err, size_t errlen);

/* JPEG: decode what `plan` needs (plan is made from the header's size and
 * rescaled to the decoded scale). *px->rgb is malloc'd. */
int dl_jpeg_decode_plan(const uint8_t *buf, size_t len, int size, int train, uint64_t aug_seed,
                        struct dl_resize_plan *plan, struct dl_pixels *px, char *err, size_t errlen);
/* Bytes that dl_jpeg_decode_plan (libjpeg's own memory included) and the
 * resampling after it allocate at most for this file and transform, read
 * from its header; 0 when the header cannot be read (decoding then fails
 * at once). */
size_t dl_jpeg_need(const uint8_t *buf, size_t len, int size, int train, uint64_t aug_seed);
/* dl_jpeg_need for dl_jpeg_decode_full(max_short); *w x *h: the decoded
 * size (0 x 0 with 0 when the header cannot be read). */
size_t dl_jpeg_full_need(const uint8_t *buf, size_t len, int max_short, int *w, int *h);
/* What dl_jpeg_encode of a w x h image allocates at most, its output included. */
size_t dl_jpeg_encode_need(int w, int h);
/* JPEG: header only. */
int dl_jpeg_dims(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);
/* Full decode to RGB8; when max_short > 0 and the short side is longer,
 * DCT-downscaled by M/8 so that it is at most max_short (and > 7/8 of it,
 * or 1/8 of the original). */
int dl_jpeg_decode_full(const uint8_t *buf, size_t len, int max_short, struct dl_pixels *px,
                        char *err, size_t errlen);
/* Encode RGB8 rows as a baseline JPEG (malloc'd into *out). */
int dl_jpeg_encode(const struct dl_pixels *px, int quality, uint8_t **out, size_t *outlen,
                   char *err, size_t errlen);
/* PNG: full decode to RGB8 (palette, gray, alpha and 16-bit converted as
 * PIL's convert("RGB") does: alpha dropped, 16-bit keeps the high byte;
 * 16-bit gray too, where PIL clips to 255). */
int dl_png_decode(const uint8_t *buf, size_t len, struct dl_pixels *px, char *err, size_t errlen);
/* dl_jpeg_need for PNG: dl_png_decode's pixels and libpng's rows, and the
 * resampling (from the IHDR chunk, which libpng requires first). */
size_t dl_png_need(const uint8_t *buf, size_t len, int size, int train, uint64_t aug_seed);
/* What dl_png_decode allocates at most; *w x *h from the IHDR chunk (0 x 0
 * with 0 when absent or refused). */
size_t dl_png_full_need(const uint8_t *buf, size_t len, int *w, int *h);

/* Everything together: encoded bytes -> normalized sample (mean, std as
 * dl_resample_chw). `name` is used in error messages. */
int dl_image_sample(const uint8_t *buf, size_t len, const char *name, int size, int train,
                    uint64_t aug_seed, const float *mean, const float *std, float *chw, char *err,
                    size_t errlen);
/* The same sample as dl_image_sample, before normalization: hwc is
 * (size,size,3) uint8 (see dl_resample_hwc8). */
int dl_image_sample_u8(const uint8_t *buf, size_t len, const char *name, int size, int train,
                       uint64_t aug_seed, uint8_t *hwc, char *err, size_t errlen);

/* The decode memory of a dataset, shared by the threads that load its
 * samples: what they hold at once (the encoded bytes, the decoded pixels,
 * the decoder's and the resampler's buffers) stays within `bytes`, a sample
 * waiting until the others give back enough, so the loader's worst case
 * does not grow with its thread count (a crafted 100-megapixel image takes
 * a gigabyte or more to decode).  Waits are served in order of arrival. */
struct dl_decode_budget;
int dl_decode_budget_create(size_t bytes, struct dl_decode_budget **out);
void dl_decode_budget_destroy(struct dl_decode_budget *b);

/* Reads one sample's encoded bytes (malloc'd into *buf; len at most the
 * caller's image limit).  0, or -1 with err. */
typedef int (*dl_fetch_fn)(void *ctx, uint8_t **buf, size_t *len, char *err, size_t errlen);

/* What a fetched sample needs besides its own bytes (an upper bound, from
 * its header; 0 when it cannot be read: using it then fails at once). */
typedef size_t (*dl_need_fn)(void *ctx, const uint8_t *buf, size_t len);
/* Uses the fetched bytes (may take them: *buf = NULL).  0, or -1 with err. */
typedef int (*dl_use_fn)(void *ctx, uint8_t **buf, size_t len, char *err, size_t errlen);
/* Under budget b: takes size_hint bytes (the file size, as far as known)
 * before fetch, then what needf says; use runs holding both, and everything
 * is given back after it.  A sample that needs more than the whole budget
 * is an error naming `name`, the bytes and the budget. */
int dl_budget_run(struct dl_decode_budget *b, size_t size_hint, dl_fetch_fn fetch, dl_need_fn needf,
                  dl_use_fn use, void *ctx, const char *name, char *err, size_t errlen);

/* dl_image_sample or (hwc set) dl_image_sample_u8 under budget b: takes
 * size_hint bytes (the file size, as far as known) from b before fetching,
 * then what the header says decoding needs; a sample that needs more than
 * the whole budget is an error naming `name`, the bytes and the budget. */
int dl_image_load(struct dl_decode_budget *b, size_t size_hint, dl_fetch_fn fetch, void *ctx, const char *name,
                  int size, int train, uint64_t aug_seed, const float *mean, const float *std, float *chw,
                  uint8_t *hwc, char *err, size_t errlen);

/* Read a whole regular file (bounded by max_bytes). */
int dl_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len, char *err, size_t errlen);
/* The same from fd, a regular file opened by the caller (st: its fstat; path
 * names it in errors); fd stays open. */
int dl_read_fd(int fd, const struct stat *st, const char *path, size_t max_bytes, uint8_t **buf, size_t *len,
               char *err, size_t errlen);

#endif
