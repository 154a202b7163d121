// The plan's counting sort of small keys, and its radix sort of wide ones, give the order a
// stable comparison sort gives, so the plans they build are the ones they were (Note [Replay]);
// and an order's inverse says where each pair went.
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

TEST_CASE("keys with many more bins than keys sort as a stable sort does, up to the bound",
          "[pipeline]") {
  torch::manual_seed(11);
  for (const int64_t bins : {int64_t{1} << 12, int64_t{131072} + 5, lrmoe::kMostOrderBins}) {
    for (const int64_t n : {0, 1, 7, 1000}) {
      INFO(n << " keys in " << bins << " bins");
      const torch::Tensor keys = torch::randint(0, bins, {n}, torch::kInt64);
      // Repeated keys, so that ties must keep their order.
      const torch::Tensor tied = torch::cat({keys, keys.flip(0)});
      const torch::Tensor expected =
          std::get<1>(torch::sort(tied, /*stable=*/true, /*dim=*/0, /*descending=*/false));
      CHECK(lrmoe::stable_order(tied, bins).equal(expected));
    }
  }
  const int64_t many = int64_t{1} << 20;
  CHECK_THROWS_WITH(lrmoe::stable_order(torch::tensor({int64_t{5}, many}), many),
                    Catch::Contains("key 1048576 outside [0, 1048576)"));
  CHECK_THROWS_WITH(lrmoe::stable_order(torch::tensor({int64_t{-1}, int64_t{5}}), many),
                    Catch::Contains("key -1 outside"));
  CHECK_THROWS_WITH(lrmoe::stable_order(torch::tensor({int64_t{5}}), lrmoe::kMostOrderBins + 1),
                    Catch::Contains("more than a counting sort's"));
}

TEST_CASE("the identity order is arange's, empty included", "[pipeline]") {
  // Shorter after longer: a prefix of the count the thread shares.
  for (const int64_t n : {0, 1, 7, 100000, 3, 300000}) {
    const torch::Tensor order = lrmoe::identity_order(n, torch::dtype(torch::kFloat32));
    CHECK(order.scalar_type() == torch::kInt64);
    CHECK(order.equal(torch::arange(n, torch::kInt64)));
    // On a device, LibTorch's arange there.
    if (torch::cuda::is_available()) {
      const torch::Tensor on_device = lrmoe::identity_order(n, torch::device(torch::kCUDA));
      CHECK(on_device.is_cuda());
      CHECK(on_device.cpu().equal(torch::arange(n, torch::kInt64)));
    }
  }
}

TEST_CASE("an order's inverse puts each position back where it came from", "[pipeline]") {
  torch::manual_seed(3);
  for (const int64_t n : {0, 1, 5000}) {
    const torch::Tensor order = torch::randperm(n, torch::kInt64);
    const torch::Tensor inverse = lrmoe::inverse_permutation(order);
    CHECK(inverse.index_select(0, order).equal(torch::arange(n, torch::kInt64)));
    CHECK(order.index_select(0, inverse).equal(torch::arange(n, torch::kInt64)));
  }
  CHECK_THROWS_WITH(lrmoe::inverse_permutation(torch::tensor({0, 2}, torch::kInt64)),
                    Catch::Contains("2 outside [0, 2)"));
}

TEST_CASE("values taken in an order are index_select's, rows whole", "[pipeline]") {
  torch::manual_seed(5);
  const torch::Tensor values = torch::randint(0, 1000, {300}, torch::kInt64);
  const torch::Tensor rows = torch::randint(0, 1000, {300, 2}, torch::kInt64);
  const torch::Tensor order = torch::randint(0, 300, {500}, torch::kInt64);
  CHECK(lrmoe::take_rows(values, order).equal(values.index_select(0, order)));
  CHECK(lrmoe::take_rows(rows, order).equal(rows.index_select(0, order)));
  // A strided view takes as its values do; an empty order takes nothing.
  CHECK(lrmoe::take_rows(rows.select(1, 1), order).equal(rows.select(1, 1).index_select(0, order)));
  CHECK(lrmoe::take_rows(values, torch::empty({0}, torch::kInt64)).numel() == 0);
  CHECK_THROWS_WITH(lrmoe::take_rows(values, torch::tensor({300}, torch::kInt64)),
                    Catch::Contains("300 outside [0, 300)"));
}
