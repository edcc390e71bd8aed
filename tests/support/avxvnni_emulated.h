/* AVX-VNNI's two multiply-adds written with AVX2, exactly (they do not saturate): force-included (-include) with
 * -D__AVXVNNI__ into a build of the fused step for a CPU without AVX-VNNI, so that the code paths written for it
 * (Intel's client CPUs since Alder Lake have it without AVX-512) run and are tested here
 * (tests/hardware/test_fused_instruction_sets.py). */
#include <immintrin.h>

static inline __m256i wl_emulated_dpbusd(__m256i acc, __m256i u, __m256i s) {
    /* unsigned bytes by signed bytes, 4 products a 32-bit lane: even and odd bytes widened to 16 bits, then pairs */
    const __m256i low = _mm256_set1_epi16(0x00ff);
    const __m256i u_even = _mm256_and_si256(u, low), u_odd = _mm256_srli_epi16(u, 8);
    const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), s_odd = _mm256_srai_epi16(s, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd)));
}

static inline __m256i wl_emulated_dpwssd(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}

#define _mm256_dpbusd_avx_epi32 wl_emulated_dpbusd
#define _mm256_dpwssd_avx_epi32 wl_emulated_dpwssd

/* the test reads this to know the emulation was compiled in (weak: every file of the library includes it) */
__attribute__((weak)) int wl_avxvnni_emulated = 1;
