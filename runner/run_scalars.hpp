#pragma once
// A run's recorded figures step by step, as named series of scalars, for the files other tools
// read (lrmoe export): losses, learning rate and gradient norm, step and MoE times (measured and
// modeled), throughput, the pairs dropped and kept and the replicas over the MoE layers, and the
// busiest rank's peak memory subtotal.

#include <cstdint>
#include <string>
#include <vector>

#include "store/results_store.hpp"

namespace lrmoe {

struct ScalarSeries {
  std::string tag;  // "loss/train": the TensorBoard tag; CSV columns use it as is
  std::vector<std::pair<int64_t, double>> points;  // (step, value), steps ascending
};

struct RunScalars {
  RunSummary run;
  // Per step in order: the step and its end as Unix seconds (the run's start plus the step
  // times up to it).
  std::vector<int64_t> steps;
  std::vector<double> wall_times;
  std::vector<ScalarSeries> series;
};

// Throws std::invalid_argument for a run the database does not hold.
RunScalars read_run_scalars(const ResultsStore& store, int64_t run);

}  // namespace lrmoe
