#include "progress_display.hpp"

#include <fmt/format.h>

#include "runner/duration_text.hpp"

namespace lrmoe {

ProgressDisplay::ProgressDisplay(int64_t max_steps, int64_t log_every)
    : max_steps_(max_steps), log_every_(log_every) {}

void ProgressDisplay::update(const StepReport& r) {
  if (r.eval_loss) last_eval_ = r.eval_loss;
  const double tokens_per_second =
      r.step_seconds > 0 ? static_cast<double>(r.tokens) / r.step_seconds : 0;
  const double eta = r.cumulative_step_seconds / static_cast<double>(r.step) *
                     static_cast<double>(max_steps_ - r.step);
  const std::string eval = last_eval_ ? fmt::format("{:.4f}", *last_eval_) : "-";
  const std::string line = fmt::format(
      "step {:>5}/{}  loss {:.4f}  eval {}  lr {:.2e}  {:.0f} tok/s  moe {:.0f}%  ETA {}", r.step,
      max_steps_, r.train_loss, eval, r.lr, tokens_per_second,
      r.step_seconds > 0 ? 100.0 * r.moe_seconds / r.step_seconds : 0.0, duration_text(eta));
  line_.show(line, r.step % log_every_ == 0 || r.eval_loss || r.step == 1);
}

void ProgressDisplay::finish() {
  line_.finish();
}

}  // namespace lrmoe
