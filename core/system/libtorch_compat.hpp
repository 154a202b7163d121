#pragma once
// Everything that differs between the LibTorch versions lrmoe builds against is decided here,
// once: Debian's 1.13 (CPU) and the one inside PyPI's PyTorch 2.x (a CUDA build). Code elsewhere
// asks this header instead of testing versions itself (Note [LibTorch versions] in
// docs/notes.md).

#include <torch/torch.h>
#include <torch/version.h>

// True when the LibTorch compiled against is at least major.minor.
#define LRMOE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10::Allocator::allocate is const before LibTorch 2.3, which made it non-const and added the
// pure virtual copy_data; an allocator declares allocate with this and copy_data where needed.
#if LRMOE_TORCH_AT_LEAST(2, 3)
#define LRMOE_ALLOCATE_CONST
#define LRMOE_ALLOCATOR_HAS_COPY_DATA 1
#else
#define LRMOE_ALLOCATE_CONST const
#define LRMOE_ALLOCATOR_HAS_COPY_DATA 0
#endif

namespace c10d {
class Backend;
class ProcessGroup;
}  // namespace c10d

namespace lrmoe::compat {

// The class c10d's Gloo and NCCL groups derive from, which holds the collectives: LibTorch 2
// split it out of c10d::ProcessGroup as c10d::Backend; the calls are the same.
#if LRMOE_TORCH_AT_LEAST(2, 0)
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

// Whether this LibTorch has at::_grouped_mm (2.9 and later): one call for a whole variable-size
// grouped GEMM, on the CPU and on CUDA (bf16 on sm80 and later, CUTLASS's fast path on sm90).
inline constexpr bool kHasGroupedMm = LRMOE_TORCH_AT_LEAST(2, 9);

// at::_grouped_mm(a, b, offs = group_ends): with a 2-D `a` and 3-D `b`, row group g of `a` times
// b[g]; with 2-D `a` and `b`, column group g of `a` times row group g of `b`, stacked.
// `group_ends`: [groups] int32 on a's device, each group's end (cumulative). Throws
// std::logic_error where kHasGroupedMm is false.
at::Tensor grouped_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& group_ends);

}  // namespace lrmoe::compat
