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
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
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

/* x (n floats) -> xq = round(x / s) + 128 as bytes, s = max|x| / 127; returns s (0 for an all-zero x). */
static float quantize_u8(uint8_t *restrict xq, const float *restrict x, int64_t n) {
    float amax = 0.0f;
#pragma omp simd reduction(max : amax)
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
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
        for (int64_t o = 0; o < n_out; o++) {
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

/* Attention of G query heads (q: G x D) over L cached positions of one KV head (keys at kb, values at vb), out G x D.
 * scores: G x L floats of scratch; row: 16 x D floats of scratch (a transposed block of keys, or a value row). */
static void attend_group(float *restrict out, const float *restrict q, const void *kv, int64_t fmt, int64_t kb,
                         int64_t vb, int64_t L, int64_t G, int64_t D, float *restrict scores, float *restrict row) {
    const float scale = 1.0f / sqrtf((float)D);
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
        for (int64_t j = 0; j < G; j++) {
            const float *qj = q + j * D;
            float acc[16] = {0};
            for (int64_t i = 0; i < D; i++) {
                const float qi = qj[i];
                const float *kt = row + i * 16;
#pragma omp simd
                for (int64_t tt = 0; tt < 16; tt++) acc[tt] += qi * kt[tt];
            }
            for (int64_t tt = 0; tt < nb; tt++) scores[j * L + t0 + tt] = acc[tt] * scale;
        }
    }
    for (int64_t j = 0; j < G; j++) {
        float *sc = scores + j * L, mx = -INFINITY, sum = 0.0f;
        for (int64_t t = 0; t < L; t++) mx = fmaxf(mx, sc[t]);
        for (int64_t t = 0; t < L; t++) {
            sc[t] = expf(sc[t] - mx);
            sum += sc[t];
        }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int64_t t = 0; t < L; t++) sc[t] *= inv;
    }
    memset(out, 0, sizeof(float) * (size_t)(G * D));
    for (int64_t t = 0; t < L; t++) {
        const float *v = kv_row(kv, fmt, vb + t * D, D, row);
        for (int64_t j = 0; j < G; j++) {
            const float w = scores[j * L + t];
            float *oj = out + j * D;
#pragma omp simd
            for (int64_t i = 0; i < D; i++) oj[i] += w * v[i];
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
    const int64_t floats = n * per_token + group * dims[D_MAX_TOKENS] + 16 * hd;
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
    float *sx = hb + n * I2, *scores = sx + n, *row = scores + G * dims[D_MAX_TOKENS];
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
        for (int64_t t = 0; t < n; t++) /* the G query heads that share KV head g read its rows once */
            for (int64_t g = 0; g < KVH; g++)
                attend_group(att + t * HD + g * G * D, qkv + t * qkv_n + g * G * D, kv, kvfmt,
                             layer_base + g * max_t * D, layer_base + (KVH + g) * max_t * D, pos + t + 1, G, D,
                             scores, row);
        linear(tmp, dim, att, HD, n, p[L_O_W], (const float *)p[L_O_S], (const int32_t *)p[L_O_R], NULL, HD, dim,
               wfmt, xq, sx);
        for (int64_t i = 0; i < n * dim; i++) x[i] += tmp[i];
        for (int64_t t = 0; t < n; t++) rms_norm(xb + t * dim, x + t * dim, (const float *)p[L_MLP_NORM], dim, eps);
        linear(hb, I2, xb, dim, n, p[L_GU_W], (const float *)p[L_GU_S], (const int32_t *)p[L_GU_R], NULL, dim, I2,
               wfmt, xq, sx);
        for (int64_t t = 0; t < n; t++) {
            float *ht = hb + t * I2;
            for (int64_t i = 0; i < inter; i++) {
                const float gt = ht[i];
                ht[i] = gt / (1.0f + expf(-gt)) * ht[inter + i];
            }
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
