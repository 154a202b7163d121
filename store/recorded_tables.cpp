#include "store/recorded_tables.hpp"

namespace lrmoe::store {

// Each list is built on first use, never during static initialization. The order of a list is
// the order of its INSERT's parameters; it need not follow the table's.

const ColumnList<StepRecord>& steps_columns() {
  using R = StepRecord;
  static const ColumnList<R> columns("steps",
                                     {
                                         {"step", &R::step},
                                         {"train_loss", &R::train_loss},
                                         {"eval_loss", &R::eval_loss},
                                         {"lr", &R::lr},
                                         {"grad_norm", &R::grad_norm},
                                         {"tokens", &R::tokens},
                                         {"step_seconds", &R::step_seconds},
                                         {"moe_seconds", &R::moe_seconds},
                                         {"moe_modeled_seconds", &R::moe_modeled_seconds},
                                         {"moe_critical_seconds", &R::moe_critical_seconds},
                                     });
  return columns;
}

const ColumnList<ExpertLoadRecord>& expert_load_columns() {
  using R = ExpertLoadRecord;
  static const ColumnList<R> columns("expert_load", {
                                                        {"step", &R::step},
                                                        {"layer", &R::layer},
                                                        {"expert", &R::expert},
                                                        {"pairs", &R::pairs},
                                                    });
  return columns;
}

const ColumnList<LayerStepRecord>& moe_layer_steps_columns() {
  using R = LayerStepRecord;
  static const ColumnList<R> columns(
      "moe_layer_steps",
      {
          {"step", &R::step},
          {"layer", &R::layer},
          {"pairs_routed", &R::pairs_routed},
          {"pairs_dropped", &R::pairs_dropped},
          {"pairs_kept", &R::pairs_kept},
          {"replicas", &R::replicas},
          {"forward_load_max", &R::forward_load_max},
          {"forward_load_mean", &R::forward_load_mean},
          {"backward_load_max", &R::backward_load_max},
          {"backward_load_mean", &R::backward_load_mean},
          {"bytes_forward_dispatch", &R::bytes_forward_dispatch},
          {"bytes_forward_combine", &R::bytes_forward_combine},
          {"bytes_backward_dispatch", &R::bytes_backward_dispatch},
          {"bytes_backward_return", &R::bytes_backward_return},
          {"bytes_replica_sync", &R::bytes_replica_sync},
          {"bytes_cross_node", &R::bytes_cross_node},
          {"forward_seconds", &R::forward_seconds},
          {"backward_seconds", &R::backward_seconds},
          {"modeled_seconds", &R::modeled_seconds},
          {"placement_seconds", &R::placement_seconds},
          {"metric_seconds", &R::metric_seconds},
          {"selection_seconds", &R::selection_seconds},
          {"routing_seconds", &R::routing_seconds},
          {"compaction_seconds", &R::compaction_seconds},
          {"measured_exchange_bytes", &R::measured_exchange_bytes},
          {"measured_exchange_seconds", &R::measured_exchange_seconds},
          {"measured_parameter_bytes", &R::measured_parameter_bytes},
          {"measured_parameter_seconds", &R::measured_parameter_seconds},
          {"critical_path_seconds", &R::critical_path_seconds},
          {"rank_sum_seconds", &R::rank_sum_seconds},
          {"modeled_compute_seconds", &R::modeled_compute_seconds},
          {"modeled_all_to_all_seconds", &R::modeled_all_to_all_seconds},
          {"modeled_gather_seconds", &R::modeled_gather_seconds},
          {"modeled_replica_seconds", &R::modeled_replica_seconds},
          {"modeled_overlapped_seconds", &R::modeled_overlapped_seconds},
          {"modeled_hidden_transfer_seconds", &R::modeled_hidden_transfer_seconds},
          {"placement_information", &R::placement_information},
      });
  return columns;
}

const ColumnList<RankMemoryRecord>& rank_memory_columns() {
  using R = RankMemoryRecord;
  static const ColumnList<R> columns("rank_memory",
                                     {
                                         {"step", &R::step},
                                         {"rank", &R::rank},
                                         {"owned", &R::owned},
                                         {"replicas", &R::replicas},
                                         {"gradients", &R::gradients},
                                         {"optimizer", &R::optimizer},
                                         {"forward_tokens", &R::forward_tokens},
                                         {"backward_tokens", &R::backward_tokens},
                                         {"dense", &R::dense},
                                         {"peak_phase", &R::peak_phase},
                                         {"peak_layer", &R::peak_layer},
                                         {"peak_subtotal", &R::peak_subtotal},
                                         {"subtotal_phase", &R::subtotal_phase},
                                         {"subtotal_layer", &R::subtotal_layer},
                                         {"measured_peak", &R::measured_peak},
                                         {"measured_forward_peak", &R::measured_forward_peak},
                                         {"measured_backward_peak", &R::measured_backward_peak},
                                     });
  return columns;
}

const ColumnList<RankLayerRecord>& rank_layer_steps_columns() {
  using R = RankLayerRecord;
  static const ColumnList<R> columns("rank_layer_steps",
                                     {
                                         {"step", &R::step},
                                         {"layer", &R::layer},
                                         {"rank", &R::rank},
                                         {"forward_pairs", &R::forward_pairs},
                                         {"backward_pairs", &R::backward_pairs},
                                         {"bytes_sent", &R::bytes_sent},
                                         {"bytes_received", &R::bytes_received},
                                         {"forward_seconds", &R::forward_seconds},
                                         {"backward_seconds", &R::backward_seconds},
                                     });
  return columns;
}

const ColumnList<ProcessLayerRecord>& process_layer_steps_columns() {
  using R = ProcessLayerRecord;
  static const ColumnList<R> columns(
      "process_layer_steps", {
                                 {"step", &R::step},
                                 {"layer", &R::layer},
                                 {"process", &R::process},
                                 {"bytes_sent", &R::bytes_sent},
                                 {"bytes_received", &R::bytes_received},
                                 {"exchange_seconds", &R::exchange_seconds},
                                 {"exchange_calls", &R::exchange_calls},
                                 {"forward_seconds", &R::forward_seconds},
                                 {"backward_seconds", &R::backward_seconds},
                                 {"parameter_bytes_sent", &R::parameter_bytes_sent},
                                 {"parameter_bytes_received", &R::parameter_bytes_received},
                                 {"parameter_seconds", &R::parameter_seconds},
                                 {"parameter_calls", &R::parameter_calls},
                                 {"parameter_blocked_seconds", &R::parameter_blocked_seconds},
                             });
  return columns;
}

const ColumnList<PlacementRecord>& placements_columns() {
  using R = PlacementRecord;
  static const ColumnList<R> columns("placements", {
                                                       {"step", &R::step},
                                                       {"layer", &R::layer},
                                                       {"expert", &R::expert},
                                                       {"rank", &R::rank},
                                                       {"slot", &R::slot},
                                                       {"owner", &R::owner},
                                                   });
  return columns;
}

const ColumnList<EventRecord>& events_columns() {
  using R = EventRecord;
  static const ColumnList<R> columns("events", {
                                                   {"time", &R::time},
                                                   {"level", &R::level},
                                                   {"message", &R::message},
                                               });
  return columns;
}

const ColumnList<TraceSpanRecord>& trace_spans_columns() {
  using R = TraceSpanRecord;
  static const ColumnList<R> columns("trace_spans", {
                                                        {"step", &R::step},
                                                        {"process", &R::process},
                                                        {"rank", &R::rank},
                                                        {"layer", &R::layer},
                                                        {"phase", &R::phase},
                                                        {"kind", &R::kind},
                                                        {"start_seconds", &R::start_seconds},
                                                        {"seconds", &R::seconds},
                                                    });
  return columns;
}

std::vector<const TableColumns*> recorded_tables() {
  return {&steps_columns(),       &expert_load_columns(),      &moe_layer_steps_columns(),
          &rank_memory_columns(), &rank_layer_steps_columns(), &process_layer_steps_columns(),
          &trace_spans_columns(), &placements_columns(),       &events_columns()};
}

}  // namespace lrmoe::store
