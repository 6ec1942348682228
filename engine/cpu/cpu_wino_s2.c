/* The stride-2 path of the Winograd convolution (cpu_wino.h). */
#include "config.h"

#include <stdlib.h>

#include "engine/cpu/cpu_wino_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "engine/cpu/cpu_wino_kern.h"

/* ---- The stride-2 path: 3x3 stride-2 convolutions, polyphase Winograd ----
 *
 * A stride-2 3-tap correlation splits by the parity of the input: along
 * each axis output i reads x[2i-1] g0 + x[2i] g1 + x[2i+1] g2, i.e. the
 * even-offset inputs (window positions 0, 2, .., 8 of a 4-output tile's 9)
 * against the 2-tap filter (g0, g2), an F(4,2) with 5 products, and the
 * odd-offset ones (positions 1, 3, 5, 7) against g1 alone, 4 products.
 * That is a 9-point transform per axis: 81 products per 4x4 output tile
 * instead of 144, all passes:
 *   forward          y  = A^T [ (G g G^T) . (B^T x B) ] A  over 9x9 input windows
 *   backward-data    the same form over 5x5 windows of dy, 8x8 dx tiles:
 *                    the even dx rows of a tile are g1 dy (identity), the
 *                    odd ones g2 dy[i] + g0 dy[i+1], an F(4,2) on the
 *                    filter rotated by 180 degrees
 *   backward-weights dg = G^T [ sum over tiles (A dy A^T) . (B^T x B) ] G
 * F(4,2) is Lavin & Gray's construction with the points 0, 1, -1, 2, inf,
 * its denominators moved into G.  The products run over chunks of S2_TC
 * tiles per thread with the whole U (81, Cin, Cout) computed once per call;
 * backward-weights adds into a dU of each thread's own, summed at the end
 * (as the wgrad path).  Weights (3, 3, C, K) (hwio), as on the panel path. */

/* t (9) from a window x (9): F(4,2)'s B^T on x0, x2, .., x8, then x1, x3, x5, x7. */
static inline void s2_bt(const vec x[9], vec t[9])
{
	const vec two = _mm512_set1_ps(2.f), three = _mm512_set1_ps(3.f);
	vec d0 = x[0], d1 = x[2], d2 = x[4], d3 = x[6], d4 = x[8];
	t[0] = _mm512_add_ps(_mm512_fmsub_ps(two, _mm512_sub_ps(d0, d2), d1), d3); /* 2d0 - d1 - 2d2 + d3 */
	t[1] = _mm512_fmadd_ps(two, d1, _mm512_sub_ps(d2, d3));		  /* 2d1 + d2 - d3 */
	t[2] = _mm512_fmsub_ps(three, d2, _mm512_fmadd_ps(two, d1, d3));	  /* -2d1 + 3d2 - d3 */
	t[3] = _mm512_sub_ps(d3, d1);
	t[4] = _mm512_add_ps(_mm512_fmsub_ps(two, _mm512_sub_ps(d1, d3), d2), d4); /* 2d1 - d2 - 2d3 + d4 */
	t[5] = x[1];
	t[6] = x[3];
	t[7] = x[5];
	t[8] = x[7];
}

/* o (4 outputs) = A^T m: F(4,2)'s A^T on m0..m4, plus m5..m8. */
static inline void s2_at(const vec m[9], vec o[4])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
	o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), _mm512_add_ps(m[3], m[5]));
	o[1] = _mm512_add_ps(_mm512_fmadd_ps(two, m[3], d12), m[6]);
	o[2] = _mm512_add_ps(_mm512_fmadd_ps(four, m[3], s12), m[7]);
	o[3] = _mm512_add_ps(_mm512_fmadd_ps(eight, m[3], d12), _mm512_add_ps(m[4], m[8]));
}

/* Backward-data: 8 dx values of a tile from its 9 products; even ones are
 * the identity part, odd ones F(4,2)'s A^T. */
static inline void s2_at_dx(const vec m[9], vec o[8])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
	o[0] = m[5];
	o[1] = _mm512_add_ps(_mm512_add_ps(m[0], s12), m[3]);
	o[2] = m[6];
	o[3] = _mm512_fmadd_ps(two, m[3], d12);
	o[4] = m[7];
	o[5] = _mm512_fmadd_ps(four, m[3], s12);
	o[6] = m[8];
	o[7] = _mm512_add_ps(_mm512_fmadd_ps(eight, m[3], d12), m[4]);
}

/* a (9) = A y for 4 output gradients. */
static inline void s2_a(const vec y[4], vec a[9])
{
	const vec two = _mm512_set1_ps(2.f), four = _mm512_set1_ps(4.f), eight = _mm512_set1_ps(8.f);
	vec e = _mm512_add_ps(y[0], y[2]), o = _mm512_add_ps(y[1], y[3]);
	a[0] = y[0];
	a[1] = _mm512_add_ps(e, o);
	a[2] = _mm512_sub_ps(e, o);
	a[3] = _mm512_fmadd_ps(eight, y[3], _mm512_fmadd_ps(four, y[2], _mm512_fmadd_ps(two, y[1], y[0])));
	a[4] = y[3];
	a[5] = y[0];
	a[6] = y[1];
	a[7] = y[2];
	a[8] = y[3];
}

/* u (9) = G g for 16 filters' 3 taps. */
static inline void s2_g(const vec g[3], vec u[9])
{
	const vec half = _mm512_set1_ps(0.5f), sixth = _mm512_set1_ps(1.f / 6), two = _mm512_set1_ps(2.f);
	u[0] = _mm512_mul_ps(g[0], half);
	u[1] = _mm512_mul_ps(_mm512_add_ps(g[0], g[2]), half);
	u[2] = _mm512_mul_ps(_mm512_sub_ps(g[0], g[2]), sixth);
	u[3] = _mm512_mul_ps(_mm512_fmadd_ps(two, g[2], g[0]), sixth);
	u[4] = g[2];
	u[5] = u[6] = u[7] = u[8] = g[1];
}

/* g (3) = G^T h: s2_g's adjoint. */
static inline void s2_gt(const vec h[9], vec g[3])
{
	const vec half = _mm512_set1_ps(0.5f), sixth = _mm512_set1_ps(1.f / 6), third = _mm512_set1_ps(1.f / 3);
	g[0] = _mm512_fmadd_ps(_mm512_add_ps(h[0], h[1]), half, _mm512_mul_ps(_mm512_add_ps(h[2], h[3]), sixth));
	g[1] = _mm512_add_ps(_mm512_add_ps(h[5], h[6]), _mm512_add_ps(h[7], h[8]));
	g[2] = _mm512_add_ps(_mm512_fmadd_ps(h[1], half, _mm512_fmsub_ps(h[3], third, _mm512_mul_ps(h[2], sixth))), h[4]);
}

/* V[p][t][c] for tile t's input window: forward 9x9 from (2 y0 - 1, 2 x0 - 1)
 * of the input; backward-data (dy) 5x5 from (y0, x0) of dy, whose even
 * and odd parts are the window itself and its first 4. */
static inline __attribute__((always_inline)) void
s2_input(const struct cpu_wino *wg, int dy, const float *src, int cin, int tile, int t, int rows,
	 float *v)
{
	int n, y0, x0;
	tile_pos(wg, tile, &n, &y0, &x0);
	int h = dy ? wg->ho : wg->h, w = dy ? wg->wo : wg->w, len = dy ? 5 : 9;
	if (!dy) {
		y0 = 2 * y0 - 1;
		x0 = 2 * x0 - 1;
	}
	for (int cb = 0; cb < cin / 16; cb++) {
		const float *plane = src + ((size_t)n * (cin / 16) + cb) * h * w * 16;
		vec tmp[9][9];
#pragma GCC unroll 9
		for (int j = 0; j < len; j++) {
			vec col[9], out[9], d[9];
			int x = x0 + j;
#pragma GCC unroll 9
			for (int i = 0; i < len; i++) {
				int y = y0 + i;
				d[i] = y >= 0 && y < h && x >= 0 && x < w
					       ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
					       : _mm512_setzero_ps();
			}
			if (dy)
#pragma GCC unroll 9
				for (int i = 0; i < 9; i++)
					col[i] = d[i / 2]; /* e0 e0 e1 e1 .. e4: evens e0..e4, odds e0..e3 */
			else
#pragma GCC unroll 9
				for (int i = 0; i < 9; i++)
					col[i] = d[i];
			s2_bt(col, out);
#pragma GCC unroll 9
			for (int i = 0; i < 9; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++) {
			vec row[9], out[9];
			if (dy)
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					row[j] = tmp[i][j / 2];
			else
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					row[j] = tmp[i][j];
			s2_bt(row, out);
#pragma GCC unroll 9
			for (int j = 0; j < 9; j++)
				_mm512_storeu_ps(v + ((size_t)(i * 9 + j) * rows + t) * cin + cb * 16, out[j]);
		}
	}
}

static inline __attribute__((always_inline)) void s2_store(float *o, vec x, enum wino_store how)
{
	if (how == STORE_ADD)
		_mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), x));
	else if (how == STORE_STREAM)
		_mm512_stream_ps(o, x);
	else
		_mm512_storeu_ps(o, x);
}

/* Tile t's outputs from its 81 products: forward the 4x4 at (y0, x0) of
 * dst (ho x wo); backward-data (dx) the 8x8 at (2 y0, 2 x0) of dx (h x w);
 * clipped at the edge. */
static inline __attribute__((always_inline)) void
s2_output(const struct cpu_wino *wg, int dx, const float *m, int cout, int tile, int t, int rows,
	  float *dst, enum wino_store how)
{
	int n, y0, x0;
	tile_pos(wg, tile, &n, &y0, &x0);
	int h = dx ? wg->h : wg->ho, w = dx ? wg->w : wg->wo, len = dx ? 8 : 4;
	if (dx) {
		y0 *= 2;
		x0 *= 2;
	}
	int ni = h - y0 < len ? h - y0 : len, nj = w - x0 < len ? w - x0 : len;
	for (int kb = 0; kb < cout / 16; kb++) {
		float *plane = dst + ((size_t)n * (cout / 16) + kb) * h * w * 16;
		vec tmp[8][9];
#pragma GCC unroll 9
		for (int j = 0; j < 9; j++) {
			vec col[9], out[8];
#pragma GCC unroll 9
			for (int i = 0; i < 9; i++)
				col[i] = _mm512_loadu_ps(m + ((size_t)(i * 9 + j) * rows + t) * cout + kb * 16);
			if (dx)
				s2_at_dx(col, out);
			else
				s2_at(col, out);
#pragma GCC unroll 9
			for (int i = 0; i < len; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 9
		for (int i = 0; i < ni; i++) {
			vec out[8];
			if (dx)
				s2_at_dx(tmp[i], out);
			else
				s2_at(tmp[i], out);
#pragma GCC unroll 9
			for (int j = 0; j < nj; j++)
				s2_store(plane + ((size_t)(y0 + i) * w + x0 + j) * 16, out[j], how);
		}
	}
}

/* Y[p][t][k] = A dy A^T for tile t's 4x4 output gradients. */
static inline __attribute__((always_inline)) void
s2_grad(const struct cpu_wino *wg, const float *ddst, int kout, int tile, int t, int rows, float *yv)
{
	int n, y0, x0, h = wg->ho, w = wg->wo;
	tile_pos(wg, tile, &n, &y0, &x0);
	for (int kb = 0; kb < kout / 16; kb++) {
		const float *plane = ddst + ((size_t)n * (kout / 16) + kb) * h * w * 16;
		vec tmp[9][4];
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			vec col[4], out[9];
#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				int y = y0 + i, x = x0 + j;
				col[i] = y < h && x < w ? _mm512_loadu_ps(plane + ((size_t)y * w + x) * 16)
							: _mm512_setzero_ps();
			}
			s2_a(col, out);
#pragma GCC unroll 9
			for (int i = 0; i < 9; i++)
				tmp[i][j] = out[i];
		}
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++) {
			vec out[9];
			s2_a(tmp[i], out);
#pragma GCC unroll 9
			for (int j = 0; j < 9; j++)
				_mm512_storeu_ps(yv + ((size_t)(i * 9 + j) * rows + t) * kout + kb * 16, out[j]);
		}
	}
}

/* u (81 vectors) = G g G^T for 16 filters g (9 vectors, a 3x3 row-major each). */
static inline __attribute__((always_inline)) void s2_filter(const vec g[9], vec u[81])
{
	vec t[9][3];
#pragma GCC unroll 3
	for (int j = 0; j < 3; j++) {
		vec col[3] = { g[j], g[3 + j], g[6 + j] }, out[9];
		s2_g(col, out);
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++)
			t[i][j] = out[i];
	}
#pragma GCC unroll 9
	for (int i = 0; i < 9; i++)
		s2_g(t[i], &u[i * 9]);
}

/* The whole U of a pass, shared by the team (call inside a parallel
 * region; ends at a barrier).  Forward: U (81, C, K), rows c, from
 * w[.][.][c][k], 16 k per vector.  Backward-data (flip): U (81, K, C), rows
 * k, from the filters rotated by 180 degrees, 16 c per vector: 16 x 16
 * blocks of each tap turned. */
static void s2_weights(const float *w, int c_n, int k_n, int flip, float *u)
{
	size_t tap = (size_t)c_n * k_n;
	vec g[9], uv[81];
	if (!flip) {
#pragma omp for schedule(static)
		for (int c = 0; c < c_n; c++)
			for (int kb = 0; kb < k_n / 16; kb++) {
				const float *g0 = w + (size_t)c * k_n + 16 * kb;
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					g[j] = _mm512_loadu_ps(g0 + j * tap);
				s2_filter(g, uv);
#pragma GCC unroll 81
				for (int p = 0; p < 81; p++)
					_mm512_storeu_ps(u + p * tap + (size_t)c * k_n + 16 * kb, uv[p]);
			}
		return;
	}
#pragma omp for schedule(static)
	for (int kb = 0; kb < k_n / 16; kb++)
		for (int cb = 0; cb < c_n / 16; cb++) {
			vec tr[9][16];
			const float *g0 = w + (size_t)(16 * cb) * k_n + 16 * kb;
#pragma GCC unroll 9
			for (int j = 0; j < 9; j++) {
				vec rows[16];
#pragma GCC unroll 16
				for (int r = 0; r < 16; r++)
					rows[r] = _mm512_loadu_ps(g0 + j * tap + (size_t)r * k_n);
				transpose16(rows, tr[j]); /* tr[j][kk]: the 16 c of k = 16 kb + kk */
			}
			for (int kk = 0; kk < 16; kk++) {
#pragma GCC unroll 9
				for (int j = 0; j < 9; j++)
					g[j] = tr[8 - j][kk];
				s2_filter(g, uv);
#pragma GCC unroll 81
				for (int p = 0; p < 81; p++)
					_mm512_storeu_ps(u + p * tap + (size_t)(16 * kb + kk) * c_n + 16 * cb, uv[p]);
			}
		}
}

/* Forward (flip 0: src (N, C/16, H, W, 16) -> dst (N, K/16, Ho, Wo, 16)) or
 * backward-data (flip 1: dy -> dx) on the stride-2 path. */
void cpu_wino_s2_conv(const struct cpu_wino *wg, int flip, const float *w, const float *src,
		    float *dst, enum wino_store how)
{
	int cin = flip ? wg->k : wg->c, cout = flip ? wg->c : wg->k;
	int ntile = wg->ntile, nchunk = (ntile + S2_TC - 1) / S2_TC;
	size_t ucount = (size_t)81 * cin * cout, pstep = (size_t)cin * cout;
	float *u = wg->u_fwd;
#pragma omp parallel num_threads(team_size(wg))
	{
		float *v = wg->du + wg->panel_len * omp_get_thread_num() + ucount;
		float *m = v + (size_t)81 * S2_TC * (wg->c > wg->k ? wg->c : wg->k);
		s2_weights(w, wg->c, wg->k, flip, u);
#pragma omp for schedule(static)
		for (int ch = 0; ch < nchunk; ch++) {
			int t0 = ch * S2_TC, nt = ntile - t0 < S2_TC ? ntile - t0 : S2_TC;
			for (int t = 0; t < nt; t++)
				if (flip)
					s2_input(wg, 1, src, cin, t0 + t, t, S2_TC, v);
				else
					s2_input(wg, 0, src, cin, t0 + t, t, S2_TC, v);
			// M_p (nt, cout) = V_p (nt, cin) U_p (cin, cout), 64 outputs at a time
			for (int p = 0; p < 81; p++)
				for (int q = 0; q < cout / 64; q++)
					gemm_rows(nt, cin, v + (size_t)p * S2_TC * cin, cin, 1,
						  u + p * pstep + 64 * q, cout,
						  m + (size_t)p * S2_TC * cout + 64 * q, cout);
			for (int t = 0; t < nt; t++)
				if (flip)
					s2_output(wg, 1, m, cout, t0 + t, t, S2_TC, dst, how);
				else
					s2_output(wg, 0, m, cout, t0 + t, t, S2_TC, dst, how);
		}
		if (how == STORE_STREAM)
			_mm_sfence();
	}
}

/* The weight gradient of 16 filters: the team's dU values of them (thread
 * j's value p at h + j * tstep + p * pstep) summed into thread 0's, then
 * its 3 x 3 taps G^T h G written to g + tap * pstep ((3, 3, C, K): taps are
 * C K = pstep floats apart).  Out of the OpenMP body, which clang's target
 * attribute does not reach. */
static inline __attribute__((always_inline)) void
s2_filter_grads(float *h, size_t tstep, int team, size_t pstep, float *g)
{
	vec t[3][9], gv[9];
	for (int j = 1; j < team; j++) {
		const float *hj = h + tstep * j;
#pragma GCC unroll 81
		for (int p = 0; p < 81; p++)
			_mm512_storeu_ps(h + p * pstep, _mm512_add_ps(_mm512_loadu_ps(h + p * pstep),
								       _mm512_loadu_ps(hj + p * pstep)));
	}
#pragma GCC unroll 9
	for (int j = 0; j < 9; j++) {
		vec col[9], out[3];
#pragma GCC unroll 9
		for (int i = 0; i < 9; i++)
			col[i] = _mm512_loadu_ps(h + (i * 9 + j) * pstep);
		s2_gt(col, out);
#pragma GCC unroll 3
		for (int i = 0; i < 3; i++)
			t[i][j] = out[i];
	}
#pragma GCC unroll 3
	for (int i = 0; i < 3; i++)
		s2_gt(t[i], &gv[i * 3]);
#pragma GCC unroll 9
	for (int i = 0; i < 9; i++)
		_mm512_storeu_ps(g + i * pstep, gv[i]);
}

/* dw (3, 3, C, K) on the stride-2 path: each thread's chunks add into its
 * own dU (81, C, K); then per filter row the threads' dU summed and turned
 * into taps. */
void cpu_wino_s2_wgrad(const struct cpu_wino *wg, const float *src, const float *ddst, float *dw)
{
	int cin = wg->c, kout = wg->k, team = team_size(wg);
	int ntile = wg->ntile, nchunk = (ntile + S2_TC - 1) / S2_TC;
	size_t pstep = (size_t)cin * kout, ucount = 81 * pstep;
#pragma omp parallel num_threads(team)
	{
		float *du = wg->du + wg->panel_len * omp_get_thread_num();
		float *v = du + ucount, *yv = v + (size_t)81 * S2_TC * (cin > kout ? cin : kout);
		int first = 1; /* a thread's first chunk writes its dU, the others add */
#pragma omp for schedule(static)
		for (int ch = 0; ch < nchunk; ch++) {
			int t0 = ch * S2_TC, nt = ntile - t0 < S2_TC ? ntile - t0 : S2_TC;
			for (int t = 0; t < nt; t++) {
				s2_input(wg, 0, src, cin, t0 + t, t, S2_TC, v);
				s2_grad(wg, ddst, kout, t0 + t, t, S2_TC, yv);
			}
			// dU_p (C, K) (+)= V_p^T (C, nt) Y_p (nt, K)
			for (int p = 0; p < 81; p++)
				for (int q = 0; q < kout / 64; q++)
					(first ? gemm_rows : gemm_rows_add)(
						cin, nt, v + (size_t)p * S2_TC * cin, 1, cin,
						yv + (size_t)p * S2_TC * kout + 64 * q, kout,
						du + p * pstep + 64 * q, kout);
			first = 0;
		}
		if (first) /* no chunk came to this thread */
			memset(du, 0, ucount * sizeof(float));
#pragma omp barrier
#pragma omp for schedule(static)
		for (int c = 0; c < cin; c++)
			for (int kb = 0; kb < kout / 16; kb++)
				s2_filter_grads(wg->du + (size_t)c * kout + 16 * kb, wg->panel_len, team,
						pstep, dw + (size_t)c * kout + 16 * kb);
	}
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
