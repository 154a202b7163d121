// The pair-row kernels (core/pipeline/pair_rows.hpp) give the results of the LibTorch composites
// they replace: bit for bit for the gather and the scatter, on one thread or two (bf16 scatters
// summed in fp32, as LibTorch 2 does), and within rounding for the dot product, which sums in its
// own order.

#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include "core/pipeline/pair_rows.hpp"

using namespace lrmoe;

namespace {

// Row indices with repeats, as pairs name their tokens: [n] int64 into [0, rows).
torch::Tensor repeated_rows(int64_t n, int64_t rows) {
  return torch::randint(rows, {n}, torch::kInt64);
}

// `fn` on `threads` intra-op threads, the previous count restored after.
template <typename Fn>
auto on_threads(int threads, Fn fn) {
  const int previous = at::get_num_threads();
  at::set_num_threads(threads);
  auto result = fn();
  at::set_num_threads(previous);
  return result;
}

}  // namespace

TEST_CASE("a scaled gather equals index_select times the scale, bit for bit", "[pair_rows]") {
  torch::manual_seed(3);
  for (const auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16}) {
    INFO(dtype);
    // Rows read in place from a column range of a wider tensor: a row stride of 37.
    const torch::Tensor wide = torch::randn({50, 37}).to(dtype);
    const torch::Tensor source = wide.narrow(1, 3, 33);
    const torch::Tensor rows = repeated_rows(200, 50);
    const torch::Tensor scale = torch::rand({200}).to(dtype);
    CHECK(
        gather_rows(source, rows, scale).equal(source.index_select(0, rows) * scale.unsqueeze(1)));
    CHECK(gather_rows(source, rows, torch::Tensor()).equal(source.index_select(0, rows)));
  }
}

TEST_CASE("an unscaled gather copies rows of any dtype and shape", "[pair_rows]") {
  const torch::Tensor source = torch::arange(5 * 2 * 3, torch::kInt64).view({5, 2, 3});
  const torch::Tensor rows = torch::tensor({4, 0, 4, 2}, torch::kInt64);
  CHECK(gather_rows(source, rows, torch::Tensor()).equal(source.index_select(0, rows)));
  const torch::Tensor flags = torch::tensor({true, false, true});
  CHECK(gather_rows(flags, torch::tensor({1, 2}, torch::kInt64), torch::Tensor())
            .equal(torch::tensor({false, true})));
  // No rows, and rows of no width.
  CHECK(gather_rows(source, torch::empty({0}, torch::kInt64), torch::Tensor()).size(0) == 0);
  CHECK(gather_rows(torch::empty({3, 0}), rows.clamp_max(2), torch::Tensor()).sizes() ==
        torch::IntArrayRef({4, 0}));
}

TEST_CASE("a gather into a part of a buffer writes that part only", "[pair_rows]") {
  const torch::Tensor buffer = torch::full({6, 4}, -1.0f);
  const torch::Tensor source = torch::arange(12, torch::kFloat32).view({3, 4});
  gather_rows_into(buffer.narrow(0, 2, 2), source, torch::tensor({2, 0}, torch::kInt64),
                   torch::tensor({2.0f, 0.5f}));
  CHECK(buffer.narrow(0, 2, 2).equal(
      torch::tensor({{16.0f, 18.0f, 20.0f, 22.0f}, {0.0f, 0.5f, 1.0f, 1.5f}})));
  CHECK(buffer.narrow(0, 0, 2).eq(-1).all().item<bool>());
  CHECK(buffer.narrow(0, 4, 2).eq(-1).all().item<bool>());
}

TEST_CASE("a weighted scatter sums like index_add_ of the products, on one thread or two",
          "[pair_rows]") {
  torch::manual_seed(5);
  for (const auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16}) {
    INFO(dtype);
    // Width 70: column chunks that do not divide it evenly.
    const torch::Tensor wide = torch::randn({300, 71}).to(dtype);
    const torch::Tensor source = wide.narrow(1, 1, 70);
    const torch::Tensor rows = repeated_rows(300, 40);
    const torch::Tensor weights = torch::rand({300});
    // Products in the rows' dtype; sums in it, or in fp32 for bf16, rounded once.
    const auto sum_dtype = dtype == torch::kBFloat16 ? torch::kFloat32 : dtype;
    const torch::Tensor expected =
        torch::zeros({40, 70}, sum_dtype)
            .index_add_(0, rows, (source * weights.to(dtype).unsqueeze(1)).to(sum_dtype))
            .to(dtype);
    for (const int threads : {1, 2}) {
      INFO(threads << " threads");
      const torch::Tensor out = on_threads(threads, [&] {
        torch::Tensor sum = torch::zeros({40, 70}, dtype);
        scatter_add_rows(sum, rows, source, weights);
        return sum;
      });
      CHECK(out.equal(expected));
    }
    torch::Tensor plain = torch::ones({40, 70}, dtype);
    scatter_add_rows(plain, rows, source, torch::Tensor());
    CHECK(plain.equal(
        torch::ones({40, 70}, sum_dtype).index_add_(0, rows, source.to(sum_dtype)).to(dtype)));
  }
}

TEST_CASE("the gathered row dot is each pair's row against its token's", "[pair_rows]") {
  torch::manual_seed(7);
  for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
    INFO(dtype);
    // Width 45: lanes of 16 and a remainder.
    const torch::Tensor tokens = torch::randn({30, 45}, dtype);
    const torch::Tensor pair_rows = torch::randn({90, 46}, dtype).narrow(1, 0, 45);
    const torch::Tensor rows = repeated_rows(90, 30);
    const torch::Tensor dot = gathered_row_dot(tokens, rows, pair_rows);
    const torch::Tensor expected =
        (tokens.to(torch::kFloat64).index_select(0, rows) * pair_rows.to(torch::kFloat64)).sum(1);
    CHECK(dot.scalar_type() == dtype);
    CHECK(torch::allclose(dot.to(torch::kFloat64), expected,
                          dtype == torch::kFloat64 ? 1e-12 : 1e-5, 1e-5));
  }
}

TEST_CASE("a row index out of range is refused, not read", "[pair_rows]") {
  const torch::Tensor source = torch::zeros({3, 4});
  const torch::Tensor bad = torch::tensor({0, 3}, torch::kInt64);
  CHECK_THROWS_WITH(gather_rows(source, bad, torch::Tensor()),
                    Catch::Contains("row index 3 out of range for 3 rows"));
  CHECK_THROWS_WITH(gather_rows(source, bad, torch::ones({2})), Catch::Contains("out of range"));
  torch::Tensor out = torch::zeros({3, 4});
  CHECK_THROWS_WITH(scatter_add_rows(out, bad, torch::ones({2, 4}), torch::Tensor()),
                    Catch::Contains("out of range"));
  CHECK_THROWS_WITH(
      gathered_row_dot(source, torch::tensor({-1}, torch::kInt64), torch::ones({1, 4})),
      Catch::Contains("out of range"));
}
