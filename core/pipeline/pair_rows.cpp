#include "core/pipeline/pair_rows.hpp"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace lrmoe {
namespace {

// Rows per task: about 64 KiB of row data, so that a task outweighs the cost of handing it out.
int64_t row_grain(const torch::Tensor& rows) {
  const int64_t row_bytes = std::max<int64_t>(1, rows.size(1) * rows.element_size());
  return std::max<int64_t>(1, (int64_t{64} << 10) / row_bytes);
}

// `t` as the kernels read it: rows of unit column stride, at any row stride.
torch::Tensor readable_rows(const torch::Tensor& t) {
  return t.size(1) <= 1 || t.stride(1) == 1 ? t : t.contiguous();
}

// A per-row factor in `like`'s dtype, contiguous; undefined stays undefined.
torch::Tensor row_factors(const torch::Tensor& factors, const torch::Tensor& like) {
  return factors.defined() ? factors.to(like.scalar_type()).contiguous() : factors;
}

void check_rows(const torch::Tensor& t, const char* what, const char* name) {
  TORCH_CHECK(t.dim() == 2, what, ": ", name, " must be [rows, width], got ", t.sizes());
}

// [rows, ...] as [rows, width]: a view where the layout allows, else a copy.
torch::Tensor as_rows(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() >= 1, "pair rows: a tensor of rows has at least one dimension");
  if (t.dim() == 2) return t;
  int64_t width = 1;
  for (int64_t d = 1; d < t.dim(); ++d) width *= t.size(d);
  return t.reshape({t.size(0), width});
}

void check_index(int64_t row, int64_t rows, const char* what) {
  TORCH_CHECK(row >= 0 && row < rows, what, ": row index ", row, " out of range for ", rows,
              " rows");
}

// Sums in kLanes independent partial sums, added up at the end: a loop the compiler vectorizes
// (one running sum would fix the order of every addition).
constexpr int64_t kLanes = 16;
template <typename math_t, typename scalar_t>
math_t dot(const scalar_t* __restrict x, const scalar_t* __restrict y, int64_t width) {
  math_t lanes[kLanes] = {};
  const int64_t whole = width - width % kLanes;
  for (int64_t c = 0; c < whole; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[l] += static_cast<math_t>(x[c + l]) * static_cast<math_t>(y[c + l]);
  }
  for (int64_t c = whole; c < width; ++c)
    lanes[c - whole] += static_cast<math_t>(x[c]) * static_cast<math_t>(y[c]);
  math_t sum = 0;
  for (const math_t lane : lanes) sum += lane;
  return sum;
}

bool on_host(const torch::Tensor& t) {
  return t.device().is_cpu();
}

}  // namespace

void gather_rows_into(const torch::Tensor& out, const torch::Tensor& source,
                      const torch::Tensor& rows, const torch::Tensor& scale) {
  constexpr const char* kWhat = "gather_rows_into";
  TORCH_CHECK(
      out.dim() >= 1 && source.dim() >= 1 && out.sizes().slice(1) == source.sizes().slice(1) &&
          rows.numel() == out.size(0) && (!scale.defined() || scale.numel() == out.size(0)),
      kWhat, ": shapes out ", out.sizes(), ", source ", source.sizes(), ", rows ", rows.sizes());
  torch::Tensor target = out;  // the same storage; the _out operators take non-const references
  if (!on_host(out) || !out.is_contiguous()) {
    if (!scale.defined()) {
      torch::index_select_out(target, source, 0, rows);
    } else {
      std::vector<int64_t> factor_shape(static_cast<std::size_t>(out.dim()), 1);
      factor_shape[0] = out.size(0);
      torch::mul_out(target, source.index_select(0, rows),
                     row_factors(scale, out).view(factor_shape));
    }
    return;
  }
  const torch::Tensor to_rows = as_rows(out);
  const torch::Tensor src = readable_rows(as_rows(source)), index = rows.contiguous();
  const int64_t width = to_rows.size(1), source_rows = src.size(0);
  const int64_t* idx = index.data_ptr<int64_t>();
  if (!scale.defined()) {  // a copy of bytes, whatever the dtype
    const int64_t row_bytes = width * out.element_size();
    const int64_t src_stride_bytes = src.stride(0) * src.element_size();
    const auto* from = static_cast<const char*>(src.data_ptr());
    auto* to = static_cast<char*>(to_rows.data_ptr());
    at::parallel_for(0, to_rows.size(0), row_grain(to_rows), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        check_index(idx[i], source_rows, kWhat);
        std::copy_n(from + idx[i] * src_stride_bytes, row_bytes, to + i * row_bytes);
      }
    });
    return;
  }
  TORCH_CHECK(out.is_floating_point(), kWhat, ": a scale needs floating-point rows, got ",
              out.scalar_type());
  const torch::Tensor factor = row_factors(scale, out);
  const int64_t src_stride = src.stride(0);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), kWhat, [&] {
        const scalar_t* from = src.data_ptr<scalar_t>();
        scalar_t* to = to_rows.data_ptr<scalar_t>();
        const scalar_t* f = factor.data_ptr<scalar_t>();
        at::parallel_for(0, to_rows.size(0), row_grain(to_rows), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            check_index(idx[i], source_rows, kWhat);
            const scalar_t* __restrict s = from + idx[i] * src_stride;
            scalar_t* __restrict o = to + i * width;
            const scalar_t w = f[i];
            for (int64_t c = 0; c < width; ++c) o[c] = s[c] * w;
          }
        });
      });
}

torch::Tensor gather_rows(const torch::Tensor& source, const torch::Tensor& rows,
                          const torch::Tensor& scale) {
  std::vector<int64_t> shape = source.sizes().vec();
  shape[0] = rows.numel();
  torch::Tensor out = torch::empty(shape, source.options());
  gather_rows_into(out, source, rows, scale);
  return out;
}

void scatter_add_rows(const torch::Tensor& out, const torch::Tensor& rows,
                      const torch::Tensor& source, const torch::Tensor& weights) {
  constexpr const char* kWhat = "scatter_add_rows";
  check_rows(out, kWhat, "out");
  check_rows(source, kWhat, "source");
  TORCH_CHECK(out.size(1) == source.size(1) && rows.numel() == source.size(0) &&
                  (!weights.defined() || weights.numel() == source.size(0)),
              kWhat, ": shapes out ", out.sizes(), ", source ", source.sizes(), ", rows ",
              rows.sizes());
  torch::Tensor target = out;
  if (!on_host(out) || !out.is_contiguous()) {
    target.index_add_(
        0, rows, weights.defined() ? source * row_factors(weights, source).unsqueeze(1) : source);
    return;
  }
  const torch::Tensor src = readable_rows(source), index = rows.contiguous();
  const torch::Tensor factor = row_factors(weights, out);
  const int64_t n = src.size(0), width = out.size(1), out_rows = out.size(0);
  const int64_t src_stride = src.stride(0);
  const int64_t* idx = index.data_ptr<int64_t>();
  // Threads split the columns, not the rows: two rows of `source` may add into one row of `out`,
  // and each output element then sums its inputs in input order whatever the thread count.
  // Chunks of at least 64 bytes, so that threads seldom write into one cache line.
  // Reduced-precision rows (bf16, fp16) sum in fp32, each output element rounded once at the end.
  const bool reduced = out.scalar_type() == torch::kBFloat16 || out.scalar_type() == torch::kHalf;
  const torch::Tensor sums = reduced ? out.to(torch::kFloat32) : out;
  const int64_t chunk = std::max<int64_t>(1, 64 / sums.element_size());
  const int64_t chunks = (width + chunk - 1) / chunk;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), kWhat, [&] {
        using sum_t = at::opmath_type<scalar_t>;
        const scalar_t* from = src.data_ptr<scalar_t>();
        sum_t* to = sums.data_ptr<sum_t>();
        const scalar_t* f = factor.defined() ? factor.data_ptr<scalar_t>() : nullptr;
        at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
          const int64_t first = begin * chunk, last = std::min(width, end * chunk);
          for (int64_t i = 0; i < n; ++i) {
            check_index(idx[i], out_rows, kWhat);
            const scalar_t* __restrict s = from + i * src_stride;
            sum_t* __restrict o = to + idx[i] * width;
            if (!f) {
              for (int64_t c = first; c < last; ++c) o[c] += static_cast<sum_t>(s[c]);
              continue;
            }
            const scalar_t w = f[i];
            // The product rounded to the rows' dtype first, as the composite's multiply does.
            for (int64_t c = first; c < last; ++c)
              o[c] += static_cast<sum_t>(static_cast<scalar_t>(s[c] * w));
          }
        });
      });
  if (reduced) out.copy_(sums);
}

torch::Tensor gathered_row_dot(const torch::Tensor& token_rows, const torch::Tensor& rows,
                               const torch::Tensor& pair_rows) {
  constexpr const char* kWhat = "gathered_row_dot";
  check_rows(token_rows, kWhat, "token_rows");
  check_rows(pair_rows, kWhat, "pair_rows");
  TORCH_CHECK(token_rows.size(1) == pair_rows.size(1) && rows.numel() == pair_rows.size(0), kWhat,
              ": shapes token_rows ", token_rows.sizes(), ", rows ", rows.sizes(), ", pair_rows ",
              pair_rows.sizes());
  if (!on_host(pair_rows)) return (token_rows.index_select(0, rows) * pair_rows).sum(1);
  const torch::Tensor a = readable_rows(token_rows.to(pair_rows.scalar_type()));
  const torch::Tensor b = readable_rows(pair_rows), index = rows.contiguous();
  torch::Tensor out = torch::empty({b.size(0)}, b.options());
  const int64_t width = b.size(1), a_rows = a.size(0);
  const int64_t a_stride = a.stride(0), b_stride = b.stride(0);
  const int64_t* idx = index.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, b.scalar_type(), kWhat, [&] {
        using math_t = at::opmath_type<scalar_t>;
        const scalar_t* pa = a.data_ptr<scalar_t>();
        const scalar_t* pb = b.data_ptr<scalar_t>();
        scalar_t* po = out.data_ptr<scalar_t>();
        at::parallel_for(0, b.size(0), row_grain(b), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            check_index(idx[i], a_rows, kWhat);
            const scalar_t* __restrict x = pa + idx[i] * a_stride;
            const scalar_t* __restrict y = pb + i * b_stride;
            po[i] = static_cast<scalar_t>(dot<math_t>(x, y, width));
          }
        });
      });
  return out;
}

}  // namespace lrmoe
