#include "core/model/swiglu_activation.hpp"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace lrmoe {
namespace {

// fp32 arithmetic for fp32 and the 16-bit types, fp64 for fp64.
template <typename scalar_t>
using Compute = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// Rows per parallel task: about 16k elements of a, enough to amortise a task.
int64_t row_grain(int64_t ffn) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ffn));
}

// d silu(a) / da = s (1 + a (1 - s)) with s = sigmoid(a); silu(a) = a s. This file is built with
// -fno-math-errno, so that std::exp compiles to code that needs no errno (core/CMakeLists.txt).
template <typename T>
T sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));
}

template <typename scalar_t>
void activation_rows(const scalar_t* pre, scalar_t* hidden, scalar_t* norm, int64_t rows,
                     int64_t ffn) {
  using T = Compute<scalar_t>;
  at::parallel_for(0, rows, row_grain(ffn), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const scalar_t* a = pre + r * 2 * ffn;
      const scalar_t* b = a + ffn;
      scalar_t* h = hidden + r * ffn;
      T squares = 0;
      for (int64_t j = 0; j < ffn; ++j) {
        const T x = static_cast<T>(a[j]);
        h[j] = static_cast<scalar_t>(x * sigmoid(x) * static_cast<T>(b[j]));
        const T stored = static_cast<T>(h[j]);  // the norm of the row as stored
        squares += stored * stored;
      }
      if (norm) norm[r] = static_cast<scalar_t>(std::sqrt(squares));
    }
  });
}

template <typename scalar_t>
void activation_backward_rows(const scalar_t* grad_hidden, const scalar_t* pre, scalar_t* grad_pre,
                              scalar_t* hidden, int64_t rows, int64_t ffn) {
  using T = Compute<scalar_t>;
  at::parallel_for(0, rows, row_grain(ffn), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const scalar_t* a = pre + r * 2 * ffn;
      const scalar_t* b = a + ffn;
      const scalar_t* g = grad_hidden + r * ffn;
      scalar_t* grad_a = grad_pre + r * 2 * ffn;
      scalar_t* grad_b = grad_a + ffn;
      scalar_t* h = hidden ? hidden + r * ffn : nullptr;
      for (int64_t j = 0; j < ffn; ++j) {
        const T x = static_cast<T>(a[j]), y = static_cast<T>(b[j]), d = static_cast<T>(g[j]);
        const T s = sigmoid(x);
        const T silu = x * s;
        grad_a[j] = static_cast<scalar_t>(d * y * s * (T(1) + x * (T(1) - s)));
        grad_b[j] = static_cast<scalar_t>(d * silu);
        if (h) h[j] = static_cast<scalar_t>(silu * y);
      }
    }
  });
}

bool fused_here(const torch::Tensor& t) {
  return t.device().is_cpu();
}

}  // namespace

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
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::BFloat16, at::ScalarType::Half, pre.scalar_type(), "swiglu_activation", [&] {
        activation_rows<scalar_t>(pre.data_ptr<scalar_t>(), out.hidden.data_ptr<scalar_t>(),
                                  row_norm ? out.row_norm.data_ptr<scalar_t>() : nullptr, rows,
                                  ffn);
      });
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
  const torch::Tensor grad = grad_hidden.to(pre.scalar_type()).contiguous();
  out.grad_pre = torch::empty({rows, 2 * ffn}, pre.options());
  if (hidden) out.hidden = torch::empty({rows, ffn}, pre.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::BFloat16, at::ScalarType::Half, pre.scalar_type(),
      "swiglu_activation_backward", [&] {
        activation_backward_rows<scalar_t>(
            grad.data_ptr<scalar_t>(), pre.data_ptr<scalar_t>(), out.grad_pre.data_ptr<scalar_t>(),
            hidden ? out.hidden.data_ptr<scalar_t>() : nullptr, rows, ffn);
      });
  return out;
}

}  // namespace lrmoe
