#include "core/train/step_trace.hpp"

namespace lrmoe {
namespace {

double seconds_since(int64_t started_ns, int64_t ns) {
  return 1e-9 * static_cast<double>(ns - started_ns);
}

// Fields of a span as it travels between processes.
constexpr int64_t kFields = 7;

}  // namespace

const char* trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::Step:
      return "step";
    case TraceKind::Layer:
      return "layer";
    case TraceKind::Plan:
      return "plan";
    case TraceKind::Expert:
      return "expert";
    case TraceKind::AllToAll:
      return "all-to-all";
    case TraceKind::Transfer:
      return "transfer";
  }
  return "step";
}

std::vector<TraceSpan> process_trace(const std::vector<LayerStepStatistics>& layers,
                                     const TimedSpans& step, int64_t process) {
  const std::vector<SpanInterval> whole = step.intervals();
  const int64_t started_ns = whole.empty() ? 0 : whole.front().start_ns;
  std::vector<TraceSpan> spans;
  auto add = [&](int64_t rank, int64_t layer, int phase, TraceKind kind,
                 const SpanInterval& interval) {
    spans.push_back({process, rank, layer, phase, kind,
                     seconds_since(started_ns, interval.start_ns), interval.seconds});
  };
  for (const SpanInterval& interval : whole) add(-1, -1, -1, TraceKind::Step, interval);
  for (const LayerStepStatistics& layer : layers) {
    const std::vector<SpanInterval> phases[kPhases] = {layer.spans.forward.intervals(),
                                                       layer.spans.backward.intervals()};
    for (int phase = 0; phase < kPhases; ++phase) {
      for (const SpanInterval& interval : phases[phase])
        add(-1, layer.layer, phase, TraceKind::Layer, interval);
      for (const SpanInterval& interval : layer.plan_spans[phase])
        add(-1, layer.layer, phase, TraceKind::Plan, interval);
      const std::vector<TimedSpans>& ranks = layer.spans.rank_expert[phase];
      for (std::size_t r = 0; r < ranks.size(); ++r) {
        for (const SpanInterval& interval : ranks[r].intervals())
          add(static_cast<int64_t>(r), layer.layer, phase, TraceKind::Expert, interval);
      }
    }
    // A call is in the backward when it starts once the layer's backward has.
    const std::vector<SpanInterval>& backward = phases[kBackwardPhase];
    auto phase_at = [&](int64_t ns) {
      return !backward.empty() && ns >= backward.front().start_ns ? kBackwardPhase : kForwardPhase;
    };
    const std::pair<const ExchangeMeasurement*, TraceKind> calls[] = {
        {&layer.exchange, TraceKind::AllToAll}, {&layer.parameters, TraceKind::Transfer}};
    for (const auto& [measurement, kind] : calls) {
      for (const ExchangeCall& call : measurement->call_log) {
        add(-1, layer.layer, phase_at(call.entered_ns), kind,
            {call.entered_ns, seconds_since(call.entered_ns, call.left_ns)});
      }
    }
  }
  return spans;
}

std::vector<TraceSpan> gather_trace(Collectives& collectives, const std::vector<TraceSpan>& local) {
  if (collectives.single()) return local;
  const auto n = static_cast<int64_t>(local.size());
  torch::Tensor rows = torch::empty({n, kFields}, torch::kFloat64);
  auto* f = rows.data_ptr<double>();
  for (const TraceSpan& s : local) {
    *f++ = static_cast<double>(s.process);
    *f++ = static_cast<double>(s.rank);
    *f++ = static_cast<double>(s.layer);
    *f++ = s.phase;
    *f++ = static_cast<double>(static_cast<int>(s.kind));
    *f++ = s.start;
    *f++ = s.seconds;
  }
  const torch::Tensor all = collectives.gather_rows(rows);
  std::vector<TraceSpan> spans;
  const auto* v = all.data_ptr<double>();
  for (int64_t i = 0; i < all.size(0); ++i, v += kFields) {
    spans.push_back({static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1]),
                     static_cast<int64_t>(v[2]), static_cast<int>(v[3]),
                     static_cast<TraceKind>(static_cast<int>(v[4])), v[5], v[6]});
  }
  return spans;
}

}  // namespace lrmoe
