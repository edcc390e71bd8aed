/* One whole decode step of a Llama/Qwen2 decoder in plain C: the torch backend's fast path for small models.
 *
 * A ~5M-parameter model's step is ~4.9M multiply-adds, a fraction of a millisecond of arithmetic, but ~150 eager torch
 * calls cost ~0.5 ms of dispatch alone (docs/benchmarks.md). Here the step is one call: every vector op runs in a
 * loop that the compiler vectorises (-O3 -march=native -fopenmp-simd), and nothing is allocated.
 *
 * Numerics: activations, norms, rotary, softmax and accumulations in float32. Weights are either float32 stored
 * transposed (in, out), as the torch backend keeps them, or int8 rows (out, in) with one float32 scale per row. An
 * int8 product quantises its input vector to 8 bits too (one scale per vector, symmetric; stored as x + 128 so that
 * AVX512-VNNI's unsigned-by-signed dot product applies, with the weight row's sum taking the offset back out), then
 * accumulates exactly in int32: one instruction per 64 multiply-adds where the CPU has VNNI, a plain loop that
 * computes the same integers where it does not.
 * The KV cache is the torch backend's own tensor, (layers, 2, kv_heads, max_tokens, head_dim) in float32 or bfloat16,
 * so that prefill (torch) and decode (here) share it. Compiled and loaded by fused.py; the layout of `dims` and
 * `ptrs` is defined there, next to the code that fills them.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define WAFERLINE_VNNI 1
#endif

enum { D_DIM, D_LAYERS, D_HEADS, D_KV_HEADS, D_HEAD_DIM, D_INTER, D_VOCAB, D_MAX_TOKENS, D_WFMT, D_KVFMT, D_EMBFMT,
       D_COUNT };
enum { W_F32 = 0, W_INT8 = 1 };
enum { KV_F32 = 0, KV_BF16 = 1 };
enum { STEP_MAX_TOKENS = 16 }; /* tokens one call of waferline_steps takes (speculative verification) */

/* Global pointers, then per layer PER_LAYER pointers (see fused.py: GLOBAL_PTRS and LAYER_PTRS). */
/* A matrix is three pointers: weights, per-row float scales (int8), per-row int32 sums of the int8 weights. */
enum { P_EMBED, P_NORM, P_HEAD_W, P_HEAD_S, P_HEAD_R, P_COS, P_SIN, P_SCRATCH, GLOBAL_PTRS };
enum { L_ATTN_NORM, L_QKV_W, L_QKV_S, L_QKV_R, L_QKV_B, L_O_W, L_O_S, L_O_R, L_MLP_NORM, L_GU_W, L_GU_S, L_GU_R,
       L_DOWN_W, L_DOWN_S, L_DOWN_R, PER_LAYER };

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even, as torch does; NaN stays NaN */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* e^x to about 2 ulp (Cephes' expf polynomial): libm's expf is a scalar call, and softmax and SiLU take one for every
 * score and every hidden unit (most of a step's non-matmul time). The AVX-512 form below does the same operations
 * (fused multiply-adds, floor, scaling by 2^n) lane by lane, so both give the same floats. */
#define EXP_LO (-87.3f)
#define EXP_HI 88.3f
#define EXP_POLY(p, r)                    \
    p = fmaf(p, r, 1.3981999507e-3f);    \
    p = fmaf(p, r, 8.3334519073e-3f);    \
    p = fmaf(p, r, 4.1665795894e-2f);    \
    p = fmaf(p, r, 1.6666665459e-1f);    \
    p = fmaf(p, r, 5.0000001201e-1f)

static inline float exp_approx(float x) {
    x = x < EXP_LO ? EXP_LO : (x > EXP_HI ? EXP_HI : x);
    const float n = floorf(fmaf(x, 1.44269504089f, 0.5f));
    const float r = fmaf(-n, -2.12194440e-4f, fmaf(-n, 0.693359375f, x));
    float p = 1.9875691500e-4f;
    EXP_POLY(p, r);
    p = fmaf(p, r * r, r) + 1.0f;
    return ldexpf(p, (int)n);
}

#ifdef __AVX512F__
static inline __m512 exp_approx16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(EXP_LO)), _mm512_set1_ps(EXP_HI));
    const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504089f), _mm512_set1_ps(0.5f)),
                                          _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x));
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

/* The largest of v[0..n) (n >= 1); exact in any order. */
static float max_of(const float *restrict v, int64_t n) {
    float mx = v[0];
#pragma omp simd reduction(max : mx)
    for (int64_t i = 0; i < n; i++) mx = v[i] > mx ? v[i] : mx;
    return mx;
}

/* v[i] = e^(v[i] - sub) for i < n; returns their sum. */
static float exp_shifted(float *restrict v, int64_t n, float sub) {
    int64_t i = 0;
    float sum = 0.0f;
#ifdef __AVX512F__
    __m512 acc = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_approx16(_mm512_sub_ps(_mm512_loadu_ps(v + i), _mm512_set1_ps(sub)));
        _mm512_storeu_ps(v + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    sum = _mm512_reduce_add_ps(acc);
#endif
    for (; i < n; i++) {
        v[i] = exp_approx(v[i] - sub);
        sum += v[i];
    }
    return sum;
}

/* h[i] = silu(h[i]) * h[n + i] for i < n. */
static void silu_mul(float *restrict h, int64_t n) {
    int64_t i = 0;
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16) {
        const __m512 g = _mm512_loadu_ps(h + i);
        const __m512 e = exp_approx16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(h + i, _mm512_mul_ps(silu, _mm512_loadu_ps(h + n + i)));
    }
#endif
    for (; i < n; i++) {
        const float g = h[i];
        h[i] = g / (1.0f + exp_approx(-g)) * h[n + i];
    }
}

/* x (n floats) -> xq = round(x / s) + 128 as bytes, s = max|x| / 127; returns s (0 for an all-zero x). */
static float quantize_u8(uint8_t *restrict xq, const float *restrict x, int64_t n) {
    float amax = 0.0f;
#pragma omp simd reduction(max : amax)
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    const float s = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) xq[i] = (uint8_t)(lrintf(x[i] * inv) + 128);
    return s;
}

/* sum_i xq[i] * row[i] in exact int32 arithmetic. */
static inline int32_t dot_u8s8(const uint8_t *restrict xq, const int8_t *restrict row, int64_t n) {
    int64_t i = 0;
    int32_t acc = 0;
#ifdef WAFERLINE_VNNI
    __m512i v = _mm512_setzero_si512();
    for (; i + 64 <= n; i += 64) v = _mm512_dpbusd_epi32(v, _mm512_loadu_si512(xq + i), _mm512_loadu_si512(row + i));
    acc = _mm512_reduce_add_epi32(v);
#endif
#pragma omp simd reduction(+ : acc)
    for (int64_t j = i; j < n; j++) acc += (int32_t)xq[j] * (int32_t)row[j];
    return acc;
}

#ifdef WAFERLINE_VNNI
/* Lane r of the result: the sum of a[r]'s 16 lanes (a transpose-and-add tree: ~3 instructions per row where one
 * horizontal sum takes ~10). */
static inline __m512i reduce16(const __m512i *a) {
    __m512i b[8], c[4];
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                                _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) /* per 128-bit lane: the lane's partial sums of rows 4i..4i+3 */
        c[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(b[2 * i], b[2 * i + 1]),
                                _mm512_unpackhi_epi64(b[2 * i], b[2 * i + 1]));
    const __m512i p0 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i p1 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_i32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Rows o..o+15 of an int8 product for n quantised vectors: the 16 rows (a few KB) stay in L1 while each vector
 * passes; the same integers, and the same float rounding, as dot_u8s8 row by row. */
static void int8_rows16(float *restrict y, int64_t ys, const uint8_t *restrict xq, int64_t n, const float *sx,
                        const int8_t *restrict q, const float *scale, const int32_t *rowsum, int64_t o, int64_t n_in) {
    const __m512i off = _mm512_mullo_epi32(_mm512_loadu_si512(rowsum + o), _mm512_set1_epi32(128));
    const __m512 so = _mm512_loadu_ps(scale + o);
    const int8_t *rows = q + o * n_in;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xt = xq + t * n_in;
        __m512i acc[16];
        for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_si512();
        for (int64_t i = 0; i < n_in; i += 64) {
            const __mmask64 m = n_in - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n_in - i)) - 1);
            const __m512i xv = _mm512_maskz_loadu_epi8(m, xt + i);
            for (int r = 0; r < 16; r++)
                acc[r] = _mm512_dpbusd_epi32(acc[r], xv, _mm512_maskz_loadu_epi8(m, rows + r * n_in + i));
        }
        const __m512i dot = _mm512_sub_epi32(reduce16(acc), off);
        _mm512_storeu_ps(y + t * ys + o,
                         _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(sx[t])), so));
    }
}
#endif

/* y[t] = W x[t] (+ b) for n vectors (rows of x, `xs` floats apart; rows of y `ys` apart), reading W once: W float32
 * transposed (in, out), or int8 (out, in) with per-row scales and sums (see top). xq: n * n_in bytes, sx: n floats.
 * Each y[t] is computed with exactly the arithmetic of a one-vector product, in the same order, so n tokens in one
 * call give the logits of n calls bit for bit. */
static void linear(float *restrict y, int64_t ys, const float *restrict x, int64_t xs, int64_t n, const void *w,
                   const float *scale, const int32_t *rowsum, const float *bias, int64_t n_in, int64_t n_out,
                   int64_t fmt, uint8_t *restrict xq, float *restrict sx) {
    if (fmt == W_INT8) {
        const int8_t *q = (const int8_t *)w;
        for (int64_t t = 0; t < n; t++) sx[t] = quantize_u8(xq + t * n_in, x + t * xs, n_in);
        int64_t o0 = 0;
#ifdef WAFERLINE_VNNI
        for (; o0 + 16 <= n_out; o0 += 16) int8_rows16(y, ys, xq, n, sx, q, scale, rowsum, o0, n_in);
#endif
        for (int64_t o = o0; o < n_out; o++) {
            const int8_t *row = q + o * n_in;
            const int32_t off = 128 * rowsum[o];
            const float so = scale[o];
            for (int64_t t = 0; t < n; t++) {
                const int32_t dot = dot_u8s8(xq + t * n_in, row, n_in) - off;
                y[t * ys + o] = (float)dot * sx[t] * so;
            }
        }
    } else if (n == 1) {
        const float *wt = (const float *)w;
        memset(y, 0, sizeof(float) * (size_t)n_out);
        for (int64_t i = 0; i < n_in; i++) {
            const float xi = x[i];
            const float *row = wt + i * n_out;
#pragma omp simd
            for (int64_t o = 0; o < n_out; o++) y[o] += xi * row[o];
        }
    } else { /* blocks of outputs, so that n partial rows of y stay in L1 while W streams once */
        const float *wt = (const float *)w;
        for (int64_t o0 = 0; o0 < n_out; o0 += 256) {
            const int64_t nb = n_out - o0 < 256 ? n_out - o0 : 256;
            for (int64_t t = 0; t < n; t++) memset(y + t * ys + o0, 0, sizeof(float) * (size_t)nb);
            for (int64_t i = 0; i < n_in; i++) {
                const float *row = wt + i * n_out + o0;
                for (int64_t t = 0; t < n; t++) {
                    const float xi = x[t * xs + i];
                    float *yt = y + t * ys + o0;
#pragma omp simd
                    for (int64_t o = 0; o < nb; o++) yt[o] += xi * row[o];
                }
            }
        }
    }
    if (bias) {
        for (int64_t t = 0; t < n; t++) {
            float *yt = y + t * ys;
#pragma omp simd
            for (int64_t o = 0; o < n_out; o++) yt[o] += bias[o];
        }
    }
}

static void rms_norm(float *restrict out, const float *restrict x, const float *restrict w, int64_t n, float eps) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

/* Half-split (NeoX / Hugging Face) rotary embedding of one head in place. */
static void rotary(float *restrict v, const float *restrict cos_row, const float *restrict sin_row, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        const float a = v[i], b = v[i + half], c = cos_row[i], s = sin_row[i];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
    }
}

/* Row t of a cache head (D values from element offset `at`) as float32 in `out`, or a pointer to it in place. */
static inline const float *kv_row(const void *kv, int64_t fmt, int64_t at, int64_t D, float *restrict out) {
    if (fmt != KV_BF16) return (const float *)kv + at;
    const uint16_t *r = (const uint16_t *)kv + at;
#pragma omp simd
    for (int64_t i = 0; i < D; i++) out[i] = bf16_to_f32(r[i]);
    return out;
}

/* Attention of n tokens' G query heads (token t's q: G x D at q + t * qs, its output at out + t * os) over one KV
 * head's cached positions (keys at kb, values at vb): token t sees the first L0 + t positions. Each block of keys and
 * each value row is read (and converted from bfloat16) once for all n tokens, and every query's scores and sums are
 * the same arithmetic in the same order as for that token alone. scores: n x G x (L0 + n - 1) floats of scratch;
 * row: 16 x D floats of scratch (a transposed block of keys, or a value row). */
static void attend_group(float *restrict out, int64_t os, const float *restrict q, int64_t qs, int64_t n, const void *kv,
                         int64_t fmt, int64_t kb, int64_t vb, int64_t L0, int64_t G, int64_t D, float *restrict scores,
                         float *restrict row) {
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t L = L0 + n - 1; /* positions the last token sees; scores rows are L apart */
    /* q.k for 16 positions at a time: the block of keys is transposed into `row` (D x 16 floats), so that each
     * query's 16 scores come from D vector multiply-adds instead of 16 dot products with horizontal sums. */
    for (int64_t t0 = 0; t0 < L; t0 += 16) {
        const int64_t nb = L - t0 < 16 ? L - t0 : 16;
        for (int64_t tt = 0; tt < nb; tt++) {
            const int64_t at = kb + (t0 + tt) * D;
            if (fmt == KV_BF16) {
                const uint16_t *r = (const uint16_t *)kv + at;
                for (int64_t i = 0; i < D; i++) row[i * 16 + tt] = bf16_to_f32(r[i]);
            } else {
                const float *r = (const float *)kv + at;
                for (int64_t i = 0; i < D; i++) row[i * 16 + tt] = r[i];
            }
        }
        for (int64_t tt = nb; tt < 16; tt++)
            for (int64_t i = 0; i < D; i++) row[i * 16 + tt] = 0.0f;
        for (int64_t t = 0; t < n; t++) {
            const int64_t Lt = L0 + t;
            if (t0 >= Lt) continue;
            const int64_t nbt = Lt - t0 < nb ? Lt - t0 : nb;
            for (int64_t j = 0; j < G; j++) {
                const float *qj = q + t * qs + j * D;
                float acc[16] = {0};
                for (int64_t i = 0; i < D; i++) {
                    const float qi = qj[i];
                    const float *kt = row + i * 16;
#pragma omp simd
                    for (int64_t tt = 0; tt < 16; tt++) acc[tt] += qi * kt[tt];
                }
                float *sc = scores + (t * G + j) * L + t0;
                for (int64_t tt = 0; tt < nbt; tt++) sc[tt] = acc[tt] * scale;
            }
        }
    }
    for (int64_t t = 0; t < n; t++) {
        const int64_t Lt = L0 + t;
        for (int64_t j = 0; j < G; j++) {
            float *sc = scores + (t * G + j) * L, mx, sum;
            mx = max_of(sc, Lt);
            sum = exp_shifted(sc, Lt, mx);
            const float inv = 1.0f / sum;
#pragma omp simd
            for (int64_t p = 0; p < Lt; p++) sc[p] *= inv;
        }
        memset(out + t * os, 0, sizeof(float) * (size_t)(G * D));
    }
    for (int64_t p = 0; p < L; p++) {
        const float *v = kv_row(kv, fmt, vb + p * D, D, row);
        for (int64_t t = p < L0 ? 0 : p - L0 + 1; t < n; t++) { /* the tokens that see position p */
            for (int64_t j = 0; j < G; j++) {
                const float w = scores[(t * G + j) * L + p];
                float *oj = out + t * os + j * D;
#pragma omp simd
                for (int64_t i = 0; i < D; i++) oj[i] += w * v[i];
            }
        }
    }
}

static inline void kv_put(void *base, int64_t fmt, int64_t i, float v) {
    if (fmt == KV_BF16)
        ((uint16_t *)base)[i] = f32_to_bf16(v);
    else
        ((float *)base)[i] = v;
}

/* Scratch floats the step needs for up to STEP_MAX_TOKENS tokens at once (fused.py allocates this many). */
int64_t waferline_scratch_floats(const int64_t *dims) {
    const int64_t dim = dims[D_DIM], h = dims[D_HEADS], kvh = dims[D_KV_HEADS], hd = dims[D_HEAD_DIM];
    const int64_t qkv = (h + 2 * kvh) * hd, n = STEP_MAX_TOKENS;
    int64_t widest = h * hd > 2 * dims[D_INTER] ? h * hd : 2 * dims[D_INTER]; /* bytes of quantised input */
    if (dim > widest) widest = dim;
    const int64_t group = h / kvh;
    const int64_t per_token = 3 * dim + qkv + h * hd + 2 * dims[D_INTER] + 1; /* x, xb, tmp, qkv, att, hb, sx */
    const int64_t floats = n * per_token + n * group * dims[D_MAX_TOKENS] + 16 * hd;
    return floats + (n * widest) / 4 + 16;
}

int64_t waferline_step_max_tokens(void) { return STEP_MAX_TOKENS; }

/* Run tokens[0..n) at positions pos..pos+n-1 (the cache holds positions < pos), write their K/V, and write the
 * logits of each (n x vocab) to `logits`: token t attends to positions <= pos + t, as n one-token steps would, and
 * every weight is read once for all n. `kv` holds `max_t` positions per layer and head (a session's cache may be
 * shorter than the model's context). */
int waferline_steps(const int64_t *dims, const float *eps_p, void *const *ptrs, void *kv, int64_t max_t,
                    const int64_t *tokens, int64_t n, int64_t pos, float *logits) {
    const int64_t dim = dims[D_DIM], n_layers = dims[D_LAYERS], H = dims[D_HEADS], KVH = dims[D_KV_HEADS];
    const int64_t D = dims[D_HEAD_DIM], inter = dims[D_INTER], vocab = dims[D_VOCAB];
    const int64_t wfmt = dims[D_WFMT], kvfmt = dims[D_KVFMT], embfmt = dims[D_EMBFMT];
    const float eps = *eps_p;
    if (n < 1 || n > STEP_MAX_TOKENS || pos < 0 || pos + n > max_t || max_t > dims[D_MAX_TOKENS]) return 1;
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= vocab) return 1;
    const int64_t G = H / KVH, half = D / 2, qkv_n = (H + 2 * KVH) * D, HD = H * D, I2 = 2 * inter;
    float *x = (float *)ptrs[P_SCRATCH];
    float *xb = x + n * dim, *tmp = xb + n * dim, *qkv = tmp + n * dim, *att = qkv + n * qkv_n, *hb = att + n * HD;
    float *sx = hb + n * I2, *scores = sx + n, *row = scores + n * G * dims[D_MAX_TOKENS];
    uint8_t *xq = (uint8_t *)(row + 16 * D);

    for (int64_t t = 0; t < n; t++) {
        if (embfmt == KV_BF16) {
            const uint16_t *e = (const uint16_t *)ptrs[P_EMBED] + tokens[t] * dim;
            for (int64_t i = 0; i < dim; i++) x[t * dim + i] = bf16_to_f32(e[i]);
        } else {
            memcpy(x + t * dim, (const float *)ptrs[P_EMBED] + tokens[t] * dim, sizeof(float) * (size_t)dim);
        }
    }

    for (int64_t l = 0; l < n_layers; l++) {
        void *const *p = ptrs + GLOBAL_PTRS + l * PER_LAYER;
        for (int64_t t = 0; t < n; t++) rms_norm(xb + t * dim, x + t * dim, (const float *)p[L_ATTN_NORM], dim, eps);
        linear(qkv, qkv_n, xb, dim, n, p[L_QKV_W], (const float *)p[L_QKV_S], (const int32_t *)p[L_QKV_R],
               (const float *)p[L_QKV_B], dim, qkv_n, wfmt, xq, sx);
        const int64_t layer_base = l * 2 * KVH * max_t * D; /* keys of layer l; values follow after KVH * max_t * D */
        for (int64_t t = 0; t < n; t++) { /* rotate q and k heads, then write k and v at pos + t */
            float *qt = qkv + t * qkv_n;
            const float *cos_row = (const float *)ptrs[P_COS] + (pos + t) * half;
            const float *sin_row = (const float *)ptrs[P_SIN] + (pos + t) * half;
            for (int64_t h = 0; h < H + KVH; h++) rotary(qt + h * D, cos_row, sin_row, half);
            const float *k = qt + H * D, *v = qt + (H + KVH) * D;
            for (int64_t g = 0; g < KVH; g++) {
                const int64_t kb = layer_base + g * max_t * D, vb = layer_base + (KVH + g) * max_t * D;
                for (int64_t i = 0; i < D; i++) {
                    kv_put(kv, kvfmt, kb + (pos + t) * D + i, k[g * D + i]);
                    kv_put(kv, kvfmt, vb + (pos + t) * D + i, v[g * D + i]);
                }
            }
        }
        for (int64_t g = 0; g < KVH; g++) /* the G query heads of n tokens that share KV head g read its rows once */
            attend_group(att + g * G * D, HD, qkv + g * G * D, qkv_n, n, kv, kvfmt, layer_base + g * max_t * D,
                         layer_base + (KVH + g) * max_t * D, pos + 1, G, D, scores, row);
        linear(tmp, dim, att, HD, n, p[L_O_W], (const float *)p[L_O_S], (const int32_t *)p[L_O_R], NULL, HD, dim,
               wfmt, xq, sx);
        for (int64_t i = 0; i < n * dim; i++) x[i] += tmp[i];
        for (int64_t t = 0; t < n; t++) rms_norm(xb + t * dim, x + t * dim, (const float *)p[L_MLP_NORM], dim, eps);
        linear(hb, I2, xb, dim, n, p[L_GU_W], (const float *)p[L_GU_S], (const int32_t *)p[L_GU_R], NULL, dim, I2,
               wfmt, xq, sx);
        for (int64_t t = 0; t < n; t++) {
            float *ht = hb + t * I2;
            silu_mul(ht, inter);
        }
        linear(tmp, dim, hb, I2, n, p[L_DOWN_W], (const float *)p[L_DOWN_S], (const int32_t *)p[L_DOWN_R], NULL, inter,
               dim, wfmt, xq, sx);
        for (int64_t i = 0; i < n * dim; i++) x[i] += tmp[i];
    }
    for (int64_t t = 0; t < n; t++) rms_norm(xb + t * dim, x + t * dim, (const float *)ptrs[P_NORM], dim, eps);
    linear(logits, vocab, xb, dim, n, ptrs[P_HEAD_W], (const float *)ptrs[P_HEAD_S], (const int32_t *)ptrs[P_HEAD_R],
           NULL, dim, vocab, wfmt, xq, sx);
    return 0;
}

/* One token: waferline_steps with n = 1. */
int waferline_step(const int64_t *dims, const float *eps_p, void *const *ptrs, void *kv, int64_t max_t, int64_t token,
                   int64_t pos, float *logits) {
    return waferline_steps(dims, eps_p, ptrs, kv, max_t, &token, 1, pos, logits);
}
