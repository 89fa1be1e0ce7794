// Dispatch of attention to its instruction sets, and the scalar reference. Single tokens have an
// AVX2 and an AVX-512 kernel (attention_avx2.cc, attention_decode_avx512.cc); prompts, in blocks of
// tokens, an AVX2 and an AVX-512 one (attention_prompt_*.cc, one template in attention_prompt.h).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "kernels/attention_impl.h"
#include "kernels/exp.h"

namespace ember::kernels {

namespace detail {

namespace {

// attend_group_scalar for keys and values read by R: one query head at a time, the same online
// softmax over the same tiles as the SIMD kernel, with sequential sums.
template <class R>
void attend_scalar(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s, float* out,
                   float* sc, float* m, float* l) {
  const int64_t hd = s.head_dim, group = s.n_heads / s.n_kv_heads, row_bytes = kv_row_bytes(kv.type, hd);
  const int64_t lo = first_visible(pos, s.sliding_window);
  const void* krow[kAttnTile];
  const void* vrow[kAttnTile];
  for (int64_t g = 0; g < group; ++g) {
    const float* qh = q + (kvh * group + g) * hd;
    float* o = out + (kvh * group + g) * hd;
    std::fill(o, o + hd, 0.0f);
    m[g] = -INFINITY;
    l[g] = 0.0f;
    for (int64_t p0 = lo; p0 <= pos; p0 += kAttnTile) {
      const int64_t n = std::min(kAttnTile, pos + 1 - p0);
      kv_rows(kv, kvh, row_bytes, p0, n, krow, vrow);
      float tmax = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        float d = 0.0f;
        for (int64_t i = 0; i < hd; ++i) d += qh[i] * R::load1(krow[j], i);
        sc[j] = d * s.scale;
        if (s.softcap > 0) sc[j] = std::tanh(sc[j] / s.softcap) * s.softcap;
        tmax = std::max(tmax, sc[j]);
      }
      if (tmax > m[g]) {  // rescale what was accumulated under the old maximum
        const float r = exp_det(m[g] - tmax);
        for (int64_t i = 0; i < hd; ++i) o[i] *= r;
        l[g] *= r;
        m[g] = tmax;
      }
      for (int64_t j = 0; j < n; ++j) {
        const float w = exp_det(sc[j] - m[g]);
        l[g] += w;
        for (int64_t i = 0; i < hd; ++i) o[i] += w * R::load1(vrow[j], i);
      }
    }
    const float inv = row_normaliser(s, kvh * group + g, m[g], l[g]);
    for (int64_t i = 0; i < hd; ++i) o[i] *= inv;
  }
}

}  // namespace

void attend_group_scalar(const float* q, int64_t pos, int64_t kvh, const KvView& kv, const AttentionShape& s,
                         float* out, float* sc, float* m, float* l) {
  with_row_reader(kv.type, s.head_dim, [&]<class R>(R) { attend_scalar<R>(q, pos, kvh, kv, s, out, sc, m, l); });
}

}  // namespace detail

void attention(const float* q, int64_t n_tokens, int64_t first_pos, const KvView& kv, const AttentionShape& s,
               float* out, ThreadPool& pool) {
  const AttentionItem item{q, n_tokens, first_pos, kv, out};
  attention(std::span<const AttentionItem>(&item, 1), s, pool);
}

void attention(std::span<const AttentionItem> items, const AttentionShape& s, ThreadPool& pool) {
  attention(items, s, pool, best_isa());
}

void attention(std::span<const AttentionItem> items, const AttentionShape& s, ThreadPool& pool, Isa isa) {
  require_isa(isa, "attention");
  const auto group_kernel = isa == Isa::Scalar   ? detail::attend_group_scalar
                            : isa == Isa::Avx512 ? detail::attend_group_avx512
                                                 : detail::attend_group_avx2;
  const int64_t q_stride = s.n_heads * s.head_dim, block = detail::block_tokens(s);
  // A prompt (an item of several tokens) goes through the prompt kernel in blocks of tokens; a
  // decode step's token alone (the scalar reference: every token alone).
  auto unit_tokens = [&](const AttentionItem& it) { return isa != Isa::Scalar && it.n_tokens > 1 && !it.by_token ? block : 1; };
  // Work unit = a block of an item's tokens x one kv head; first_unit[i] is item i's first unit.
  std::vector<int64_t> first_unit(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t per = unit_tokens(items[i]);
    first_unit[i + 1] = first_unit[i] + (items[i].n_tokens + per - 1) / per * s.n_kv_heads;
  }
  pool.parallel_for(first_unit.back(), 1, [&](int64_t u0, int64_t u1) {
    const size_t group = static_cast<size_t>(s.n_heads / s.n_kv_heads);
    std::vector<float> sc(detail::kAttnTile * group), m(group), l(group);
    std::optional<detail::AttnScratch> w;  // made at a chunk's first prompt unit (decode needs none)
    size_t i = static_cast<size_t>(std::upper_bound(first_unit.begin(), first_unit.end(), u0) - first_unit.begin()) - 1;
    for (int64_t u = u0; u < u1; ++u) {
      while (u >= first_unit[i + 1]) ++i;
      const AttentionItem& it = items[i];
      const int64_t per = unit_tokens(it);
      const int64_t t = (u - first_unit[i]) / s.n_kv_heads * per, kvh = (u - first_unit[i]) % s.n_kv_heads;
      if (per > 1) {
        if (!w) w.emplace(s);
        const int64_t nt = std::min(per, it.n_tokens - t);
        if (isa == Isa::Avx512) detail::attend_block_avx512(it, t, nt, kvh, s, *w);
        else detail::attend_block_avx2(it, t, nt, kvh, s, *w);
        continue;
      }
      group_kernel(it.q + t * q_stride, it.first_pos + t, kvh, it.kv, s, it.out + t * q_stride, sc.data(), m.data(),
                   l.data());
    }
  });
}

}  // namespace ember::kernels
