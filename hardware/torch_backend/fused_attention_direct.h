/* The fused step's attention over a chunk with nothing stored between its steps (fused_attention.c includes this
 * file, once, after fused_attention_simd.h): AVX-512 and a bfloat16 cache of head width 32 or 64, one token's queries
 * or several tokens' (a draft's verification, a prefill's piece). Each block of 16 keys is transposed in registers and multiplied into
 * the scores at once, each chunk's value rows read once front to back with the sums in registers: the floats of the
 * blockwise path in fused_attention.c, which writes the transposed keys out and reads them back. */
#ifndef WAFERLINE_FUSED_ATTENTION_DIRECT_H
#define WAFERLINE_FUSED_ATTENTION_DIRECT_H
#ifdef __AVX512F__
/* direct_scores_bf16: nb (<= 16) keys (k, D apart) against NQ (<= 8) queries (element i of query j at q[i IS + j JS],
 * IS and JS constants: one token's queries in place, IS 1 and JS D; wl_attend_queries' transposed ones, IS 8 and JS
 * 1), each 32 elements of the keys transposed as 32-bit pairs in registers (transpose16_regs, as key_block_bf16) and
 * split into their two floats there, multiplied into the scores at once rather than stored as a block and read back
 * for every 8 queries: each score's multiply-adds in element order 0 .. D - 1, as block_scores_at's on
 * key_block_bf16's rows. Query j's scores, times `scale`, at dst + j * C (all nb of them: a query that sees fewer
 * positions uses only its first ones). */
static inline __attribute__((always_inline)) void direct_scores_bf16(const float *restrict q, const int64_t IS,
                                                                     const int64_t JS, const int64_t D, const int NQ,
                                                                     const uint16_t *k, int64_t nb, float *dst,
                                                                     int64_t C, float scale) {
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    __m512 a[8];
    for (int j = 0; j < NQ; j++) a[j] = _mm512_setzero_ps();
    rows_ahead(k, D);
    for (int64_t c = 0; c < D; c += 32) {
        __m512 r[16], t[16];
        for (int64_t tt = 0; tt < 16; tt++)
            r[tt] = tt < nb ? _mm512_loadu_ps((const void *)(k + tt * D + c)) : _mm512_setzero_ps();
        transpose16_regs(r, t); /* t[e], lane tt: elements c + 2 e and c + 2 e + 1 of key tt */
        for (int e = 0; e < 16; e++) {
            const __m512i pair = _mm512_castps_si512(t[e]);
            const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
            const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(pair, high));
            const float *qe = q + (c + 2 * e) * IS;
            for (int j = 0; j < NQ; j++) a[j] = _mm512_fmadd_ps(_mm512_set1_ps(qe[j * JS]), even, a[j]);
            for (int j = 0; j < NQ; j++) a[j] = _mm512_fmadd_ps(_mm512_set1_ps(qe[IS + j * JS]), odd, a[j]);
        }
    }
    const __mmask16 m = (__mmask16)((1u << nb) - 1);
    for (int j = 0; j < NQ; j++) _mm512_mask_storeu_ps(dst + j * C, m, _mm512_mul_ps(a[j], _mm512_set1_ps(scale)));
}

/* chunk_values_bf16: the NQ (<= 4) outputs o[j] (kept split per 32 elements, as add_weighted_bf16_n keeps them) over
 * the value rows (v, D apart) with weights w[j][0 .. np[j]), output j taking the first np[j] rows (the rows its token
 * sees), the sums in registers from the first row to the last: each element's multiply-adds the same, in the same
 * order, as add_weighted_bf16_n's block after block from zero, and each row read once, front to back, rather than a
 * pass over every 16 rows for each 32 elements. */
static inline __attribute__((always_inline)) void chunk_values_bf16(float *const *o, const float *const *w,
                                                                    const int NQ, const uint16_t *v, const int64_t D,
                                                                    const int64_t *np) {
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    __m512 acc[4][4]; /* [output][16 floats]: per 32 elements the even ones, then the odd ones */
    int64_t first = np[0], last = np[0];
    for (int j = 0; j < NQ; j++) {
        first = np[j] < first ? np[j] : first, last = np[j] > last ? np[j] : last;
        for (int64_t h = 0; h < D / 16; h++) acc[j][h] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < last; p++) {
        __m512 x[4];
        for (int64_t c = 0; c < D; c += 32) {
            const __m512i pair = _mm512_loadu_si512((const void *)(v + p * D + c));
            x[c / 16] = _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
            x[c / 16 + 1] = _mm512_castsi512_ps(_mm512_and_si512(pair, high));
        }
        const int all = p < first; /* every output takes the row: only a few tokens' last rows are not */
        for (int j = 0; j < NQ; j++) {
            if (!all && p >= np[j]) continue;
            const __m512 wp = _mm512_set1_ps(w[j][p]);
            for (int64_t h = 0; h < D / 16; h++) acc[j][h] = _mm512_fmadd_ps(wp, x[h], acc[j][h]);
        }
    }
    for (int j = 0; j < NQ; j++)
        for (int64_t h = 0; h < D / 16; h++) _mm512_storeu_ps(o[j] + 16 * h, acc[j][h]);
}

/* Whether a chunk takes the two above: queries that were transposed (qt: any number of tokens, wl_attend_queries'
 * buffer permitting), or one token's G <= 8 read where they are. Up to 16 tokens of 7 or 12 queries a KV head, each
 * key block transposed again for every 8 queries, this was still faster than the blockwise path (which transposes it
 * once, but stores it and reads it back, and the value sums for every block) */
#define ATTN_DIRECT(n, fmt, D, G, qt)                                                                                 \
    ((fmt) == KV_BF16 && ((D) == 32 || (D) == 64) && ((qt) != NULL || ((n) == 1 && (G) <= 8)))

/* direct_scores_bf16 and chunk_values_bf16 (above) with the head width and the queries' count constants */
#define UP_TO_4(call, D_)                                                                                             \
    case 1: call(1, D_); break;                                                                                       \
    case 2: call(2, D_); break;                                                                                       \
    case 3: call(3, D_); break
#define UP_TO_8(call, D_)                                                                                             \
    UP_TO_4(call, D_);                                                                                                \
    case 4: call(4, D_); break;                                                                                       \
    case 5: call(5, D_); break;                                                                                       \
    case 6: call(6, D_); break;                                                                                       \
    case 7: call(7, D_); break
/* call(NQ, D) for NQ 1 .. TOP (the default: TOP) and D 32 or 64 */
#define BY_SHAPE(call, NQ_, TOP)                                                                                      \
    if (D == 32) {                                                                                                    \
        switch (NQ_) {                                                                                                \
            UP_TO_##TOP(call, 32);                                                                                    \
        default: call(TOP, 32); break;                                                                                \
        }                                                                                                             \
    } else {                                                                                                          \
        switch (NQ_) {                                                                                                \
            UP_TO_##TOP(call, 64);                                                                                    \
        default: call(TOP, 64); break;                                                                                \
        }                                                                                                             \
    }

/* The scores of the block of nb keys at k for every query of the chunk (query i's at sc + i C): from their transposed
 * groups of 8 (qt), one group at a time, or where there are none, one token's G <= 8 read where they are (q). */
static void direct_scores(const float *q, const float *qt, int64_t n, int64_t G, int64_t D, const uint16_t *k,
                          int64_t nb, float *sc, float scale) {
    if (qt == NULL) {
#define STRIDED(NQ, D_) direct_scores_bf16(q, 1, D_, D_, NQ, k, nb, sc, WL_ATTN_CHUNK, scale)
        BY_SHAPE(STRIDED, G, 8)
#undef STRIDED
        return;
    }
    for (int64_t g0 = 0; g0 < n * G; g0 += 8) {
        const int64_t nq = n * G - g0 < 8 ? n * G - g0 : 8;
        const float *qg = qt + g0 * D; /* group g0 / 8: element i of its query r at qg[i 8 + r] */
        float *dst = sc + g0 * WL_ATTN_CHUNK;
#define TRANSPOSED(NQ, D_) direct_scores_bf16(qg, 8, 1, D_, NQ, k, nb, dst, WL_ATTN_CHUNK, scale)
        BY_SHAPE(TRANSPOSED, nq, 8)
#undef TRANSPOSED
    }
}

/* The value sums of the chunk [c0, c1) (its rows at v) for every query that sees some of it, 4 at a time: query t G +
 * j (token t sees the positions < L0 + t) with its weights at sc + (t G + j) C, its sums at part + (t G + j) P. */
static void direct_values(float *part, const float *sc, int64_t n, int64_t G, int64_t D, const uint16_t *v,
                          int64_t L0, int64_t c0, int64_t c1) {
    float *o[4];
    const float *w[4];
    int64_t np[4];
    int no = 0;
    for (int64_t i = 0; i < n * G; i++) {
        const int64_t seen = (L0 + i / G < c1 ? L0 + i / G : c1) - c0;
        if (seen <= 0) continue;
        o[no] = part + i * WL_ATTN_PART(D), w[no] = sc + i * WL_ATTN_CHUNK, np[no++] = seen;
        if (no < 4 && i + 1 < n * G) continue; /* the last token sees the whole chunk: the last group is run */
#define VALUES(NQ, D_) chunk_values_bf16(o, w, NQ, v, D_, np)
        BY_SHAPE(VALUES, no, 4)
#undef VALUES
        no = 0;
    }
}
#undef BY_SHAPE
#undef UP_TO_8
#undef UP_TO_4
#endif
#endif
