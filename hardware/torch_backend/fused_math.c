/* The fused step's elementwise math: a vectorised e^x for softmax and SiLU, and the argmax and logsumexp of each row
 * of logits that generation reads per token (fused.h). Vectorised with AVX-512 (16 lanes) or AVX2 and FMA (8 lanes),
 * else the scalar loops the compiler makes of them. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#define MATH_AVX2 1
#endif

/* e^x to about 2 ulp (Cephes' expf polynomial): libm's expf is a scalar call, and softmax and SiLU take one for every
 * score and every hidden unit. The AVX-512 form below does the same operations (fused multiply-adds, floor, scaling
 * by 2^n) lane by lane, so both give the same floats; so does the AVX2 form, which builds 2^n from its bits as the
 * scalar one does. */
#define EXP_LO (-87.3f)
#define EXP_HI 88.3f

static inline float exp_approx(float x) {
    x = x < EXP_LO ? EXP_LO : (x > EXP_HI ? EXP_HI : x);
    const float n = floorf(fmaf(x, 1.44269504089f, 0.5f));
    const float r = fmaf(-n, -2.12194440e-4f, fmaf(-n, 0.693359375f, x));
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    /* p 2^n with 2^n built from its bits (n is within [-126, 127] after the clamp): exactly ldexpf's and
     * _mm512_scalef_ps's product, without libm's call */
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
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

#ifdef MATH_AVX2
static inline __m256 exp_approx8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_LO)), _mm256_set1_ps(EXP_HI));
    const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504089f), _mm256_set1_ps(0.5f)));
    const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x));
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

static inline float hsum8_ps(__m256 a) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}
#endif

float wl_exp_shifted(float *restrict v, int64_t n, float sub) {
    int64_t i = 0;
    float sum = 0.0f;
#ifdef __AVX512F__
    __m512 acc = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_approx16(_mm512_sub_ps(_mm512_loadu_ps(v + i), _mm512_set1_ps(sub)));
        _mm512_storeu_ps(v + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) { /* the last n % 16 values, lanes masked (a softmax row's length is its token's position + 1) */
        const __mmask16 mk = (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = exp_approx16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, v + i), _mm512_set1_ps(sub)));
        _mm512_mask_storeu_ps(v + i, mk, e);
        acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(mk, e));
        i = n;
    }
    sum = _mm512_reduce_add_ps(acc);
#elif defined(MATH_AVX2)
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(v + i), _mm256_set1_ps(sub)));
        _mm256_storeu_ps(v + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    sum = hsum8_ps(acc);
#endif
    for (; i < n; i++) {
        v[i] = exp_approx(v[i] - sub);
        sum += v[i];
    }
    return sum;
}

/* Per row of logits (n rows of `vocab`): the first index of its largest value, that value, and log(sum(e^v)),
 * which greedy decoding and the per-token log-probability need (two torch calls cost ~20 µs a token; this, a few).
 * A row whose largest value is not finite (NaN, or every value -inf) gets index -1: the caller asks torch. With
 * `until_miss` (n_until ids: the draft a k-token step verified, row r predicting until_miss[r]), it stops after the
 * first row whose index differs from its draft id, as greedy decoding reads no row after that one. Returns the rows
 * done. */
int64_t waferline_row_stats(const float *restrict rows, int64_t n, int64_t vocab, int64_t *restrict top,
                            float *restrict top_value, float *restrict lse, const int64_t *restrict until_miss,
                            int64_t n_until) {
    for (int64_t r = 0; r < n; r++) {
        if (r > 0 && r <= n_until && top[r - 1] != until_miss[r - 1])
            return r; /* greedy decoding ends the draft at row r - 1: the rows after it are never read */
        const float *v = rows + r * vocab;
        float mx = -INFINITY;
        int64_t i = 0, at = -1;
        int nan = 0;
#ifdef __AVX512F__
        __m512 m = _mm512_set1_ps(-INFINITY);
        for (; i + 16 <= vocab; i += 16) {
            const __m512 x = _mm512_loadu_ps(v + i);
            nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q) != 0;
            m = _mm512_max_ps(m, x);
        }
        mx = _mm512_reduce_max_ps(m);
#elif defined(MATH_AVX2)
        __m256 m = _mm256_set1_ps(-INFINITY);
        for (; i + 8 <= vocab; i += 8) {
            const __m256 x = _mm256_loadu_ps(v + i);
            nan |= _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0;
            m = _mm256_max_ps(m, x);
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, m);
        for (int k = 0; k < 8; k++) mx = lanes[k] > mx ? lanes[k] : mx;
#endif
        for (; i < vocab; i++) {
            nan |= v[i] != v[i];
            mx = v[i] > mx ? v[i] : mx;
        }
        if (nan || !isfinite(mx)) {
            top[r] = -1;
            top_value[r] = lse[r] = NAN;
            continue;
        }
        i = 0;
#ifdef __AVX512F__
        for (; at < 0 && i + 16 <= vocab; i += 16) {
            const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(v + i), _mm512_set1_ps(mx), _CMP_EQ_OQ);
            if (hit) at = i + __builtin_ctz((unsigned)hit);
        }
#elif defined(MATH_AVX2)
        for (; at < 0 && i + 8 <= vocab; i += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(v + i), _mm256_set1_ps(mx), _CMP_EQ_OQ));
            if (hit) at = i + __builtin_ctz((unsigned)hit);
        }
#endif
        for (; at < 0 && i < vocab; i++)
            if (v[i] == mx) at = i;
        float sum = 0.0f;
        i = 0;
#ifdef __AVX512F__
        __m512 acc = _mm512_setzero_ps();
        for (; i + 16 <= vocab; i += 16)
            acc = _mm512_add_ps(acc, exp_approx16(_mm512_sub_ps(_mm512_loadu_ps(v + i), _mm512_set1_ps(mx))));
        sum = _mm512_reduce_add_ps(acc);
#elif defined(MATH_AVX2)
        __m256 acc = _mm256_setzero_ps();
        for (; i + 8 <= vocab; i += 8)
            acc = _mm256_add_ps(acc, exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(v + i), _mm256_set1_ps(mx))));
        sum = hsum8_ps(acc);
#endif
        for (; i < vocab; i++) sum += exp_approx(v[i] - mx);
        top[r] = at;
        top_value[r] = mx;
        lse[r] = mx + logf(sum);
    }
    return n;
}

void wl_silu_mul(float *restrict h, int64_t n) {
    int64_t i = 0;
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16) {
        const __m512 g = _mm512_loadu_ps(h + i);
        const __m512 e = exp_approx16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(h + i, _mm512_mul_ps(silu, _mm512_loadu_ps(h + n + i)));
    }
#elif defined(MATH_AVX2)
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(h + i);
        const __m256 e = exp_approx8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(silu, _mm256_loadu_ps(h + n + i)));
    }
#endif
    for (; i < n; i++) {
        const float g = h[i];
        h[i] = g / (1.0f + exp_approx(-g)) * h[n + i];
    }
}


/* For tests: v[i] = e^(v[i] - sub) in place as softmax takes it (wl_exp_shifted); returns their sum. */
float waferline_exp_shifted(float *v, int64_t n, float sub) { return wl_exp_shifted(v, n, sub); }
