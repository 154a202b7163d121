#include "run_recorder.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "interrupt.hpp"

namespace lrmoe {
namespace {

constexpr double kFlushEverySeconds = 2.0;

// Largest and mean pairs per rank.
std::pair<int64_t, double> max_and_mean(const std::vector<int64_t>& load) {
  if (load.empty()) return {0, 0.0};
  return {*std::max_element(load.begin(), load.end()),
          static_cast<double>(std::accumulate(load.begin(), load.end(), int64_t{0})) /
              static_cast<double>(load.size())};
}

LayerStepRecord layer_step_record(int64_t step, const LayerStepStatistics& s) {
  LayerStepRecord record;
  record.step = step;
  record.layer = s.layer;
  record.pairs_routed = s.pairs_routed;
  record.pairs_dropped = s.pairs_dropped;
  record.pairs_kept = s.pairs_kept;
  record.replicas = s.replicas;
  std::tie(record.forward_load_max, record.forward_load_mean) = max_and_mean(s.forward_load);
  std::tie(record.backward_load_max, record.backward_load_mean) = max_and_mean(s.backward_load);
  record.bytes_forward_dispatch = s.traffic.forward_dispatch;
  record.bytes_forward_combine = s.traffic.forward_combine;
  record.bytes_backward_dispatch = s.traffic.backward_dispatch;
  record.bytes_backward_return = s.traffic.backward_return;
  record.bytes_replica_sync = s.traffic.replica_sync;
  record.bytes_cross_node = s.traffic.cross_node;
  record.forward_seconds = s.forward_seconds;
  record.backward_seconds = s.backward_seconds;
  record.modeled_seconds = s.modeled.total();
  record.critical_path_seconds = s.critical_path.seconds;
  record.rank_sum_seconds = s.critical_path.rank_sum;
  record.modeled_compute_seconds = s.modeled.compute();
  record.modeled_all_to_all_seconds = s.modeled.all_to_all;
  record.modeled_gather_seconds = s.modeled.gathers;
  record.modeled_replica_seconds = s.modeled.replicas;
  record.modeled_overlapped_seconds = s.modeled.overlapped;
  record.modeled_hidden_transfer_seconds = s.modeled.hidden_transfers;
  record.placement_seconds = s.overhead.placement;
  record.metric_seconds = s.overhead.metric;
  record.selection_seconds = s.overhead.selection;
  record.routing_seconds = s.overhead.routing;
  record.compaction_seconds = s.overhead.compaction;
  record.placement_information = plan_information_name(s.information);
  for (const ProcessStepMeasurement& process : s.processes) {
    record.measured_exchange_bytes += process.exchange.bytes_sent;
    record.measured_exchange_seconds =
        std::max(record.measured_exchange_seconds, process.exchange.seconds);
    record.measured_parameter_bytes += process.parameters.bytes_sent;
    record.measured_parameter_seconds =
        std::max(record.measured_parameter_seconds, process.parameters.seconds);
  }
  return record;
}

// One logical rank in one layer and step: its pairs, bytes and time on the critical path.
RankLayerRecord rank_layer_record(int64_t step, const LayerStepStatistics& layer,
                                  std::size_t rank) {
  RankLayerRecord row;
  row.step = step;
  row.layer = layer.layer;
  row.rank = static_cast<int64_t>(rank);
  row.forward_pairs = layer.forward_load[rank];
  row.backward_pairs = layer.backward_load[rank];
  row.bytes_sent = layer.bytes_sent[rank];
  row.bytes_received = layer.bytes_received[rank];
  row.forward_seconds = layer.critical_path.rank_seconds[kForwardPhase][rank];
  row.backward_seconds = layer.critical_path.rank_seconds[kBackwardPhase][rank];
  return row;
}

// One logical rank's memory in one step: the peak of its timeline and when it occurs.
RankMemoryRecord rank_memory_record(int64_t step, std::size_t rank, const MemoryPeak& peak) {
  const RankMemory& m = peak.at_peak;
  RankMemoryRecord row;
  row.step = step;
  row.rank = static_cast<int64_t>(rank);
  row.owned = m.owned;
  row.replicas = m.replicas;
  row.gradients = m.gradients;
  row.optimizer = m.optimizer;
  row.forward_tokens = m.forward_tokens;
  row.backward_tokens = m.backward_tokens;
  row.dense = m.dense;
  row.peak_phase = phase_name(peak.peak.phase);
  row.peak_layer = peak.peak.layer;
  row.peak_subtotal = peak.subtotal;
  row.subtotal_phase = phase_name(peak.subtotal_peak.phase);
  row.subtotal_layer = peak.subtotal_peak.layer;
  return row;
}

TraceSpanRecord trace_span_record(int64_t step, const TraceSpan& span) {
  TraceSpanRecord row;
  row.step = step;
  row.process = span.process;
  if (span.rank >= 0) row.rank = span.rank;
  if (span.layer >= 0) row.layer = span.layer;
  row.phase = span.phase == kForwardPhase    ? "forward"
              : span.phase == kBackwardPhase ? "backward"
                                             : "step";
  row.kind = trace_kind_name(span.kind);
  row.start_seconds = span.start;
  row.seconds = span.seconds;
  return row;
}

}  // namespace

RunRecorder::RunRecorder(ResultsStore& store, int64_t run, ProgressDisplay* progress)
    : store_(store),
      run_(run),
      progress_(progress),
      last_flush_(std::chrono::steady_clock::now()) {}

void RunRecorder::on_step(const StepReport& r) {
  StepRecord record;
  record.step = r.step;
  record.train_loss = r.train_loss;
  record.eval_loss = r.eval_loss;
  record.lr = r.lr;
  record.grad_norm = r.grad_norm;
  record.tokens = r.tokens;
  record.step_seconds = r.step_seconds;
  record.moe_seconds = r.moe_seconds;
  record.moe_modeled_seconds = r.moe_modeled_seconds;
  record.moe_critical_seconds = r.moe_critical_seconds;
  store_.add_step(run_, record);
  for (const LayerLoad& load : r.expert_load)
    store_.add_expert_load(run_, r.step, load.layer, load.pairs_per_expert);
  for (const LayerStepStatistics& layer : r.layers) {
    store_.add_layer_step(run_, layer_step_record(r.step, layer));
    record_placement(r.step, layer);
    for (std::size_t rank = 0; rank < layer.forward_load.size(); ++rank) {
      store_.add_rank_layer(run_, rank_layer_record(r.step, layer, rank));
    }
    for (const ProcessStepMeasurement& p : layer.processes) {
      store_.add_process_layer(
          run_, {r.step, layer.layer, p.process, p.exchange.bytes_sent, p.exchange.bytes_received,
                 p.exchange.seconds, p.exchange.calls, p.times.wall[kForwardPhase],
                 p.times.wall[kBackwardPhase], p.parameters.bytes_sent, p.parameters.bytes_received,
                 p.parameters.seconds, p.parameters.calls, p.parameters.blocked_seconds});
    }
  }
  for (const TraceSpan& span : r.trace)
    store_.add_trace_span(run_, trace_span_record(r.step, span));
  for (std::size_t rank = 0; rank < r.rank_memory.size(); ++rank) {
    RankMemoryRecord row = rank_memory_record(r.step, rank, r.rank_memory[rank]);
    if (rank < r.rank_measured_peak.size() && r.rank_measured_peak[rank]) {
      const MeasuredPeaks& measured = *r.rank_measured_peak[rank];
      row.measured_peak = measured.step;
      row.measured_forward_peak = measured.forward;
      row.measured_backward_peak = measured.backward;
    }
    store_.add_rank_memory(run_, row);
  }

  const auto now = std::chrono::steady_clock::now();
  if (r.eval_loss ||
      std::chrono::duration<double>(now - last_flush_).count() >= kFlushEverySeconds) {
    store_.flush();
    last_flush_ = now;
  }
  if (progress_) progress_->update(r);
}

void RunRecorder::record_placement(int64_t step, const LayerStepStatistics& layer) {
  std::vector<std::pair<int64_t, int64_t>>& owners = owners_[layer.layer];
  for (const ExpertInstance& instance : layer.placement) {
    const auto expert = static_cast<std::size_t>(instance.expert);
    const std::pair<int64_t, int64_t> where{instance.rank, instance.slot};
    if (instance.owner) {
      if (expert < owners.size() && owners[expert] == where) continue;
      if (expert >= owners.size()) owners.resize(expert + 1, {-1, -1});
      owners[expert] = where;
    }
    store_.add_placement(run_, {step, layer.layer, instance.expert, instance.rank, instance.slot,
                                instance.owner ? 1 : 0});
  }
}

void RunRecorder::before_checkpoint(int64_t /*step*/) {
  store_.flush();
  last_flush_ = std::chrono::steady_clock::now();
}

bool RunRecorder::stop_requested() const {
  return interrupt_requested();
}

}  // namespace lrmoe
