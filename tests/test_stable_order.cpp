// The plan's counting sort of small keys gives the order a stable comparison sort gives, so the
// plans it builds are the ones they were (Note [Replay]).
#include <catch2/catch.hpp>

#include "core/pipeline/stable_order.hpp"

TEST_CASE("the counting sort orders small keys exactly as a stable sort does", "[pipeline]") {
  torch::manual_seed(7);
  for (const int64_t bins : {1, 2, 17, 384}) {
    for (const int64_t n : {0, 1, 1000, 131072}) {
      INFO(n << " keys in " << bins << " bins");
      const torch::Tensor keys = torch::randint(0, bins, {n}, torch::kInt64);
      const torch::Tensor expected =
          std::get<1>(torch::sort(keys, /*stable=*/true, /*dim=*/0, /*descending=*/false));
      CHECK(lrmoe::stable_order(keys, bins).equal(expected));
    }
  }
  // A view with a stride sorts as its values do.
  const torch::Tensor strided =
      torch::tensor({3, 9, 1, 9, 3, 9, 0, 9}, torch::kInt64).slice(0, 0, 8, 2);
  CHECK(lrmoe::stable_order(strided, 4).equal(torch::tensor({3, 1, 0, 2}, torch::kInt64)));
  CHECK_THROWS_WITH(lrmoe::stable_order(torch::tensor({0, 4}, torch::kInt64), 4),
                    Catch::Contains("key 4 outside [0, 4)"));
}
