// The placement trace (Note [Placement trace]): every replica each step, each owner when it first
// appears and when it moves, and the expert_owners view that expands the owners to every step.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runner/progress_display.hpp"
#include "runner/run_recorder.hpp"
#include "store/results_store.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

using lrmoe::ExpertInstance;
using lrmoe_test::scalar;

namespace {

lrmoe::StepReport step_with_placement(int64_t step, std::vector<ExpertInstance> placement) {
  lrmoe::StepReport report;
  report.step = step;
  lrmoe::LayerStepStatistics layer;
  layer.layer = 0;
  layer.placement = std::move(placement);
  report.layers.push_back(std::move(layer));
  return report;
}

}  // namespace

TEST_CASE("the placement trace keeps every replica per step and each owner only when it moves",
          "[store][placement]") {
  lrmoe_test::TempFolder dir;
  auto store = lrmoe::ResultsStore::open(dir.file("trace.db"));
  const int64_t run = store->begin_run(lrmoe_test::sample_run("trace"));
  lrmoe::ProgressDisplay progress(3, 1000);
  lrmoe::RunRecorder recorder(*store, run, &progress);
  // {expert, rank, slot, owner}
  recorder.on_step(step_with_placement(1, {{0, 0, 0, true}, {1, 1, 0, true}, {0, 1, 1, false}}));
  recorder.on_step(step_with_placement(2, {{0, 0, 0, true}, {1, 0, 1, false}, {1, 1, 0, true}}));
  recorder.on_step(step_with_placement(3, {{1, 0, 0, true}, {0, 1, 0, true}}));  // owners swap
  progress.finish();
  store->flush();

  CHECK(scalar(*store, "SELECT count(*) FROM placements WHERE owner = 1") == "4");
  CHECK(scalar(*store, "SELECT count(*) FROM placements WHERE step = 2") == "1");
  CHECK(scalar(*store,
               "SELECT group_concat(expert || '@' || rank) FROM placements "
               "WHERE owner = 0 ORDER BY step") == "0@1,1@0");
  CHECK(scalar(*store,
               "SELECT group_concat(expert || '@' || rank || ':' || slot, ' ') FROM "
               "(SELECT * FROM expert_owners WHERE step = 2 ORDER BY expert)") == "0@0:0 1@1:0");
  CHECK(scalar(*store,
               "SELECT group_concat(expert || '@' || rank, ' ') FROM "
               "(SELECT * FROM expert_owners WHERE step = 3 ORDER BY expert)") == "0@1 1@0");
}
