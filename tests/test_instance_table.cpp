// The instance table (core/pipeline/instance_table.hpp): instances in (rank, slot) order, each
// expert's listed owner first, then its replicas in that order; a plan that breaks the contract
// refused with the expert it names.

#include <catch2/catch.hpp>

#include <vector>

#include "core/pipeline/instance_table.hpp"

using namespace lrmoe;

namespace {

std::vector<int64_t> listed(const InstanceTable& table, int64_t expert) {
  const InstanceList list = table.instances_of(expert);
  return {list.begin(), list.end()};
}

}  // namespace

TEST_CASE("an instance table lists each expert's owner first, then its replicas by rank and slot",
          "[pipeline]") {
  // Given in no order: expert 1's owner sits after both its replicas in (rank, slot) order.
  PlacementPlan plan;
  plan.instances = {{1, 2, 0, true}, {0, 0, 1, true},  {1, 1, 1, false},
                    {2, 1, 0, true}, {1, 0, 0, false}, {0, 2, 1, false}};
  plan.quota = {4, 4, 4};
  const InstanceTable table = build_instance_table(plan, 3, 3, 2, "test");

  // (rank, slot) order: (0,0) 1r, (0,1) 0, (1,0) 2, (1,1) 1r, (2,0) 1, (2,1) 0r.
  REQUIRE(table.size() == 6);
  CHECK(table.num_experts() == 3);
  CHECK(table.replicas() == 3);
  CHECK(table.instance_rank == std::vector<int64_t>{0, 0, 1, 1, 2, 2});
  CHECK(listed(table, 0) == std::vector<int64_t>{1, 5});
  CHECK(listed(table, 1) == std::vector<int64_t>{4, 0, 3});
  CHECK(listed(table, 2) == std::vector<int64_t>{2});
  CHECK(table.instances_of(1).front() == 4);
  CHECK(table.instances_of(1).size() == 3);
  // Copied into lists that had other lengths and sizes.
  std::vector<std::vector<int64_t>> lists = {{7, 7, 7, 7}, {}, {7}, {7}};
  table.copy_instance_lists(lists);
  CHECK(lists == std::vector<std::vector<int64_t>>{{1, 5}, {4, 0, 3}, {2}});
  // The tensors come with place_on, not with the table.
  CHECK_FALSE(table.instance_expert.defined());
}

TEST_CASE("an instance table refuses an expert with two owners, none, or no instance",
          "[pipeline]") {
  PlacementPlan plan;
  plan.quota = {4, 4};
  SECTION("two owners") {
    plan.instances = {{0, 0, 0, true}, {1, 0, 1, true}, {0, 1, 0, true}};
    CHECK_THROWS_WITH(build_instance_table(plan, 2, 2, 2, "test"),
                      Catch::Contains("gave expert 0 two owners"));
  }
  SECTION("no owner") {
    plan.instances = {{0, 0, 0, true}, {1, 0, 1, false}};
    CHECK_THROWS_WITH(build_instance_table(plan, 2, 2, 2, "test"),
                      Catch::Contains("gave expert 1 no owner"));
  }
  SECTION("no instance") {
    plan.instances = {{0, 0, 0, true}};
    CHECK_THROWS_WITH(build_instance_table(plan, 2, 2, 2, "test"),
                      Catch::Contains("gave expert 1 no instance"));
  }
  SECTION("a quota list of the wrong length") {
    plan.instances = {{0, 0, 0, true}, {1, 0, 1, true}};
    plan.quota = {4};
    CHECK_THROWS_WITH(build_instance_table(plan, 2, 2, 2, "test"),
                      Catch::Contains("returned 1 quota values for 2 experts"));
  }
}
