// Trainer::gather_measurements: every process's measured times, exchanges and allocator peaks
// brought to every process in one gather, and each MoE layer's critical path from them (Note
// [Critical path], Note [Device timing] in docs/notes.md).

#include "core/train/trainer.hpp"

namespace lrmoe {

void Trainer::gather_measurements(StepReport& report, std::optional<MeasuredPeaks> measured) {
  if (report.layers.empty()) return;
  const int64_t ranks = experiment_.cluster.ranks;
  const int64_t processes = collectives_->size();
  // Per layer: wall and planning seconds by phase, exchange bytes, seconds and calls, parameter
  // transfer bytes, seconds and calls, then each rank's expert seconds by phase (zero for the
  // ranks of other processes).
  constexpr int64_t kProcessFields = 13;
  const int64_t fields = kProcessFields + kPhases * ranks;
  const auto layers = static_cast<int64_t>(report.layers.size());
  // After the layers: the step's wall time and the device's measured peaks of the step, its
  // forward and its backward (-1: none).
  torch::Tensor local = torch::zeros({1, layers * fields + 4}, torch::kFloat64);
  auto* values = local.data_ptr<double>();
  for (int64_t l = 0; l < layers; ++l) {
    const LayerStepStatistics& s = report.layers[l];
    double* f = values + l * fields;
    f[0] = s.forward_seconds;
    f[1] = s.backward_seconds;
    f[2] = s.planning_seconds[kForwardPhase];
    f[3] = s.planning_seconds[kBackwardPhase];
    f[4] = static_cast<double>(s.exchange.bytes_sent);
    f[5] = static_cast<double>(s.exchange.bytes_received);
    f[6] = s.exchange.seconds;
    f[7] = static_cast<double>(s.exchange.calls);
    f[8] = static_cast<double>(s.parameters.bytes_sent);
    f[9] = static_cast<double>(s.parameters.bytes_received);
    f[10] = s.parameters.seconds;
    f[11] = static_cast<double>(s.parameters.calls);
    f[12] = s.parameters.blocked_seconds;
    for (int phase = 0; phase < kPhases; ++phase) {
      const std::vector<double>& expert = s.rank_expert_seconds[phase];
      std::copy(expert.begin(), expert.end(), f + kProcessFields + phase * ranks);
    }
  }
  values[layers * fields] = report.step_seconds;
  values[layers * fields + 1] = measured ? static_cast<double>(measured->step) : -1.0;
  values[layers * fields + 2] = measured ? static_cast<double>(measured->forward) : -1.0;
  values[layers * fields + 3] = measured ? static_cast<double>(measured->backward) : -1.0;
  // [processes, ...]: one row from each.
  const torch::Tensor all =
      collectives_->single() ? local
                             : collectives_->gather_rows(local, std::vector<int64_t>(processes, 1));
  const auto* rows = all.data_ptr<double>();
  const int64_t width = all.size(1);

  report.moe_seconds = 0;
  report.moe_critical_seconds = 0;
  for (int64_t l = 0; l < layers; ++l) {
    LayerStepStatistics& s = report.layers[l];
    s.processes.clear();
    std::vector<double> expert[kPhases];
    for (auto& phase : expert) phase.assign(static_cast<std::size_t>(ranks), 0.0);
    std::vector<ProcessPhaseTimes> times;
    for (int64_t p = 0; p < processes; ++p) {
      const double* f = rows + p * width + l * fields;
      ProcessStepMeasurement m;
      m.process = p;
      m.times.wall[kForwardPhase] = f[0];
      m.times.wall[kBackwardPhase] = f[1];
      m.times.planning[kForwardPhase] = f[2];
      m.times.planning[kBackwardPhase] = f[3];
      m.exchange.bytes_sent = static_cast<int64_t>(f[4]);
      m.exchange.bytes_received = static_cast<int64_t>(f[5]);
      m.exchange.seconds = f[6];
      m.exchange.calls = static_cast<int64_t>(f[7]);
      m.parameters.bytes_sent = static_cast<int64_t>(f[8]);
      m.parameters.bytes_received = static_cast<int64_t>(f[9]);
      m.parameters.seconds = f[10];
      m.parameters.calls = static_cast<int64_t>(f[11]);
      m.parameters.blocked_seconds = f[12];
      for (int phase = 0; phase < kPhases; ++phase) {
        for (int64_t r = 0; r < ranks; ++r)
          expert[phase][static_cast<std::size_t>(r)] += f[kProcessFields + phase * ranks + r];
      }
      s.forward_seconds = std::max(s.forward_seconds, f[0]);
      s.backward_seconds = std::max(s.backward_seconds, f[1]);
      times.push_back(m.times);
      if (processes > 1) s.processes.push_back(m);
    }
    s.critical_path = critical_path(expert, times, ranks / processes);
    report.moe_seconds += s.forward_seconds + s.backward_seconds;
    report.moe_critical_seconds += s.critical_path.seconds;
  }
  const int64_t ranks_per_process = ranks / processes;
  report.rank_measured_peak.assign(static_cast<std::size_t>(ranks), std::nullopt);
  for (int64_t p = 0; p < processes; ++p) {
    const double* tail = rows + p * width + layers * fields;
    report.step_seconds = std::max(report.step_seconds, tail[0]);
    if (tail[1] < 0) continue;
    const MeasuredPeaks peaks{static_cast<int64_t>(tail[1]), static_cast<int64_t>(tail[2]),
                              static_cast<int64_t>(tail[3])};
    for (int64_t r = p * ranks_per_process; r < (p + 1) * ranks_per_process; ++r)
      report.rank_measured_peak[static_cast<std::size_t>(r)] = peaks;
  }
}

}  // namespace lrmoe
