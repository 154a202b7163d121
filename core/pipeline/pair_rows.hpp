#pragma once
// Rows moved between a layer's tokens and its token-expert pairs, each move one pass on the CPU:
// a gather that scales each row as it copies it, a scatter that weights each row as it adds it,
// and the dot product of each pair's row with its token's. The LibTorch composites they replace
// made a [pairs, width] intermediate each (index_select then mul; mul then index_add_, whose
// CPU loop is serial) and cost about 5% of bench-pipeline's layer time. Elsewhere (CUDA) they
// are those composites.
//
// Results are those of the composites: products are rounded to the tensors' dtype before they
// are added, and each output element of a scatter sums its inputs in input order, on any number
// of threads; bf16 and fp16 rows sum in fp32 and are rounded once, as LibTorch 2's index_add_
// does (1.13's rounds after every addition). Only the dot product sums in its own order (in
// fp32, fp64 for fp64 tensors).
//
// Row tensors are [rows, width] with unit column stride and any row stride (a narrowed column
// range of a wider tensor is read in place); index tensors are int64, weights and scales are
// [rows] of the rows' dtype or convertible to it.

#include <torch/torch.h>

namespace lrmoe {

// out[i] = source[rows[i]] * scale[i]; without `scale` a plain gather. out [n, ...] is written
// whole; rows [n] int64; source [m, ...] of out's dtype and row shape (any dtype; a scale only
// for floating-point ones).
void gather_rows_into(const torch::Tensor& out, const torch::Tensor& source,
                      const torch::Tensor& rows, const torch::Tensor& scale);
torch::Tensor gather_rows(const torch::Tensor& source, const torch::Tensor& rows,
                          const torch::Tensor& scale);

// out[rows[i]] += weights[i] * source[i] for i in order, as out.index_add_(0, rows, source *
// weights) sums; without `weights`, out.index_add_(0, rows, source). out [m, width] (bf16 and
// fp16 summed in fp32); rows [n] int64; source [n, width].
void scatter_add_rows(const torch::Tensor& out, const torch::Tensor& rows,
                      const torch::Tensor& source, const torch::Tensor& weights);

// [n] with element i the dot product of token_rows[rows[i]] and pair_rows[i]: token_rows
// [m, width], rows [n] int64, pair_rows [n, width]; in pair_rows' dtype.
torch::Tensor gathered_row_dot(const torch::Tensor& token_rows, const torch::Tensor& rows,
                               const torch::Tensor& pair_rows);

}  // namespace lrmoe
