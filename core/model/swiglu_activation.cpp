#include "core/model/swiglu_activation.hpp"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// The row loops and what they call are inlined into their callers below, so that fp32's are
// compiled for each instruction set by LRMOE_VECTOR_CLONES.
#define LRMOE_ALWAYS_INLINE inline __attribute__((always_inline))
// fp32's row loops, compiled for AVX-512, AVX2 with FMA and the x86-64 baseline, the best the
// processor has chosen when the program loads (function multiversioning, GCC and Clang on ELF).
// The file is compiled without contracting a multiply and an add into one FMA
// (core/CMakeLists.txt), so every clone rounds every operation alike: the same bits on every
// machine, and the backward's recomputed hidden rows equal the forward's. One SiLU-times-b pass
// over [8192, 512] rows measured 4.5 ms (AVX-512) against 18.5 ms through the C library's expf
// (2.8 ms with contraction).
#if defined(__x86_64__) && defined(__ELF__)
#define LRMOE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#else
#define LRMOE_VECTOR_CLONES
#endif

namespace lrmoe {
namespace {

// fp32 arithmetic for fp32 and the 16-bit types, fp64 for fp64.
template <typename scalar_t>
using Compute = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// Rows per parallel task: about 16k elements of a, enough to amortise a task.
int64_t row_grain(int64_t ffn) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ffn));
}

// e^x in fp32 without a library call, so that the loops over it vectorize (a call to expf kept
// them scalar: it was half of the activation's time). x = n ln2 + r with |r| <= ln2 / 2; e^r from
// Cephes' degree-7 polynomial (relative error within 2 ulp of fp32), 2^n written into the exponent
// bits. Rounding to n adds 1.5 * 2^23, which leaves n in the sum's low mantissa bits. Inputs are
// clamped to [-87, 88], where e^x stays a normal float; sigmoid(x) beyond them is 0 or 1 within
// fp32 anyway.
LRMOE_ALWAYS_INLINE float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundShift = 12582912.0f;  // 1.5 * 2^23
  constexpr uint32_t kShiftBits = 0x4B400000u;
  constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;  // ln 2 in two parts
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float shifted = x * kLog2e + kRoundShift;
  const float n = shifted - kRoundShift;
  const float r = x - n * kLn2High - n * kLn2Low;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e_r = p * r * r + r + 1.0f;
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const uint32_t scale_bits = (bits - kShiftBits + 127u) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return e_r * scale;
}

LRMOE_ALWAYS_INLINE double exp_of(double x) {
  return std::exp(x);
}
LRMOE_ALWAYS_INLINE float exp_of(float x) {
  return exp_f32(x);
}

// d silu(a) / da = s (1 + a (1 - s)) with s = sigmoid(a); silu(a) = a s.
template <typename T>
LRMOE_ALWAYS_INLINE T sigmoid(T a) {
  return T(1) / (T(1) + exp_of(-a));
}

// The sum of squares of a row as stored, in 16 running partial sums: a fixed order that the
// compiler can keep in vector registers (one running sum is a chain it must keep in order).
template <typename scalar_t>
LRMOE_ALWAYS_INLINE double row_norm(const scalar_t* h, int64_t ffn) {
  using T = Compute<scalar_t>;
  constexpr int64_t kLanes = 16;
  T partial[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= ffn; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) {
      const T v = static_cast<T>(h[j + k]);
      partial[k] += v * v;
    }
  for (; j < ffn; ++j) {
    const T v = static_cast<T>(h[j]);
    partial[j % kLanes] += v * v;
  }
  T squares = 0;
  for (T value : partial) squares += value;
  return std::sqrt(static_cast<double>(squares));
}

// One row of the forward (rows do not overlap, as in backward_row below).
template <typename scalar_t>
LRMOE_ALWAYS_INLINE void forward_row(const scalar_t* __restrict a, const scalar_t* __restrict b,
                                     scalar_t* __restrict h, int64_t ffn) {
  using T = Compute<scalar_t>;
  for (int64_t j = 0; j < ffn; ++j) {
    const T x = static_cast<T>(a[j]);
    h[j] = static_cast<scalar_t>(x * sigmoid(x) * static_cast<T>(b[j]));
  }
}

template <typename scalar_t>
LRMOE_ALWAYS_INLINE void forward_row_loop(const scalar_t* pre, scalar_t* hidden, scalar_t* norm,
                                          int64_t norm_stride, int64_t ffn, int64_t begin,
                                          int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const scalar_t* a = pre + r * 2 * ffn;
    scalar_t* h = hidden + r * ffn;
    forward_row(a, a + ffn, h, ffn);
    // The norm of the row as stored.
    if (norm) norm[r * norm_stride] = static_cast<scalar_t>(row_norm(h, ffn));
  }
}

// One row of the backward; the hidden row written too where kHidden (a compile-time choice, so
// that the loop has no branch to keep it from vectorizing). The rows do not overlap: without
// __restrict the compiler's run-time overlap checks sent the loop to its scalar version.
template <bool kHidden, typename scalar_t>
LRMOE_ALWAYS_INLINE void backward_row(const scalar_t* __restrict g, const scalar_t* __restrict a,
                                      const scalar_t* __restrict b, scalar_t* __restrict grad_a,
                                      scalar_t* __restrict grad_b, scalar_t* __restrict h,
                                      int64_t ffn) {
  using T = Compute<scalar_t>;
  for (int64_t j = 0; j < ffn; ++j) {
    const T x = static_cast<T>(a[j]), y = static_cast<T>(b[j]), d = static_cast<T>(g[j]);
    const T s = sigmoid(x);
    const T silu = x * s;
    grad_a[j] = static_cast<scalar_t>(d * y * s * (T(1) + x * (T(1) - s)));
    grad_b[j] = static_cast<scalar_t>(d * silu);
    if constexpr (kHidden) h[j] = static_cast<scalar_t>(silu * y);
  }
}

template <typename scalar_t>
LRMOE_ALWAYS_INLINE void backward_row_loop(const scalar_t* grad_hidden, const scalar_t* pre,
                                           scalar_t* grad_pre, scalar_t* hidden, int64_t ffn,
                                           int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const scalar_t* g = grad_hidden + r * ffn;
    const scalar_t* a = pre + r * 2 * ffn;
    scalar_t* grad_a = grad_pre + r * 2 * ffn;
    if (hidden) {
      backward_row<true>(g, a, a + ffn, grad_a, grad_a + ffn, hidden + r * ffn, ffn);
    } else {
      backward_row<false>(g, a, a + ffn, grad_a, grad_a + ffn, static_cast<scalar_t*>(nullptr),
                          ffn);
    }
  }
}

// The row loops as called: fp32's cloned per instruction set, the other dtypes' as they are.
template <typename scalar_t>
void forward_rows(const scalar_t* pre, scalar_t* hidden, scalar_t* norm, int64_t norm_stride,
                  int64_t ffn, int64_t begin, int64_t end) {
  forward_row_loop(pre, hidden, norm, norm_stride, ffn, begin, end);
}
LRMOE_VECTOR_CLONES void forward_rows(const float* pre, float* hidden, float* norm,
                                      int64_t norm_stride, int64_t ffn, int64_t begin,
                                      int64_t end) {
  forward_row_loop(pre, hidden, norm, norm_stride, ffn, begin, end);
}
template <typename scalar_t>
void backward_rows(const scalar_t* grad_hidden, const scalar_t* pre, scalar_t* grad_pre,
                   scalar_t* hidden, int64_t ffn, int64_t begin, int64_t end) {
  backward_row_loop(grad_hidden, pre, grad_pre, hidden, ffn, begin, end);
}
LRMOE_VECTOR_CLONES void backward_rows(const float* grad_hidden, const float* pre, float* grad_pre,
                                       float* hidden, int64_t ffn, int64_t begin, int64_t end) {
  backward_row_loop(grad_hidden, pre, grad_pre, hidden, ffn, begin, end);
}

template <typename scalar_t>
void activation_rows(const scalar_t* pre, scalar_t* hidden, scalar_t* norm, int64_t norm_stride,
                     int64_t rows, int64_t ffn) {
  at::parallel_for(0, rows, row_grain(ffn), [&](int64_t begin, int64_t end) {
    forward_rows(pre, hidden, norm, norm_stride, ffn, begin, end);
  });
}

template <typename scalar_t>
void activation_backward_rows(const scalar_t* grad_hidden, const scalar_t* pre, scalar_t* grad_pre,
                              scalar_t* hidden, int64_t rows, int64_t ffn) {
  at::parallel_for(0, rows, row_grain(ffn), [&](int64_t begin, int64_t end) {
    backward_rows(grad_hidden, pre, grad_pre, hidden, ffn, begin, end);
  });
}

bool fused_here(const torch::Tensor& t) {
  return t.device().is_cpu();
}

}  // namespace

void swiglu_activation_into(const torch::Tensor& pre, const torch::Tensor& hidden,
                            const torch::Tensor& row_norm) {
  TORCH_CHECK(pre.is_contiguous() && hidden.is_contiguous(), "swiglu_activation_into: rows");
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::BFloat16, at::ScalarType::Half, pre.scalar_type(), "swiglu_activation", [&] {
        activation_rows<scalar_t>(pre.data_ptr<scalar_t>(), hidden.data_ptr<scalar_t>(),
                                  row_norm.defined() ? row_norm.data_ptr<scalar_t>() : nullptr,
                                  row_norm.defined() ? row_norm.stride(0) : 0, pre.size(0),
                                  pre.size(1) / 2);
      });
}

void swiglu_activation_backward_into(const torch::Tensor& grad_hidden, const torch::Tensor& pre,
                                     const torch::Tensor& grad_pre, const torch::Tensor& hidden) {
  TORCH_CHECK(grad_hidden.is_contiguous() && pre.is_contiguous() && grad_pre.is_contiguous() &&
                  (!hidden.defined() || hidden.is_contiguous()),
              "swiglu_activation_backward_into: rows");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::BFloat16, at::ScalarType::Half, pre.scalar_type(),
                                  "swiglu_activation_backward", [&] {
                                    activation_backward_rows<scalar_t>(
                                        grad_hidden.data_ptr<scalar_t>(), pre.data_ptr<scalar_t>(),
                                        grad_pre.data_ptr<scalar_t>(),
                                        hidden.defined() ? hidden.data_ptr<scalar_t>() : nullptr,
                                        pre.size(0), pre.size(1) / 2);
                                  });
}

SwiGLUActivation swiglu_activation(const torch::Tensor& pre_activations, bool row_norm) {
  const int64_t rows = pre_activations.size(0), ffn = pre_activations.size(1) / 2;
  SwiGLUActivation out;
  if (!fused_here(pre_activations)) {
    out.hidden =
        torch::silu(pre_activations.narrow(1, 0, ffn)) * pre_activations.narrow(1, ffn, ffn);
    if (row_norm) out.row_norm = out.hidden.norm(2, 1);
    return out;
  }
  const torch::Tensor pre = pre_activations.contiguous();
  out.hidden = torch::empty({rows, ffn}, pre.options());
  if (row_norm) out.row_norm = torch::empty({rows}, pre.options());
  swiglu_activation_into(pre, out.hidden, out.row_norm);
  return out;
}

SwiGLUActivationGrad swiglu_activation_backward(const torch::Tensor& grad_hidden,
                                                const torch::Tensor& pre_activations, bool hidden) {
  const int64_t rows = pre_activations.size(0), ffn = pre_activations.size(1) / 2;
  SwiGLUActivationGrad out;
  if (!fused_here(pre_activations)) {
    auto a = pre_activations.narrow(1, 0, ffn);
    auto b = pre_activations.narrow(1, ffn, ffn);
    auto s = torch::sigmoid(a);
    auto silu = a * s;
    out.grad_pre = torch::cat({grad_hidden * b * s * (1 + a * (1 - s)), grad_hidden * silu}, 1);
    if (hidden) out.hidden = silu * b;
    return out;
  }
  const torch::Tensor pre = pre_activations.contiguous();
  out.grad_pre = torch::empty({rows, 2 * ffn}, pre.options());
  if (hidden) out.hidden = torch::empty({rows, ffn}, pre.options());
  swiglu_activation_backward_into(grad_hidden.to(pre.scalar_type()).contiguous(), pre, out.grad_pre,
                                  out.hidden);
  return out;
}

}  // namespace lrmoe
