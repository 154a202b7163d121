#include "run_recorder.hpp"

#include "interrupt.hpp"

namespace lrmoe {
namespace {

constexpr double kFlushEverySeconds = 2.0;

}  // namespace

RunRecorder::RunRecorder(ResultsStore& store, int64_t run, ProgressDisplay& progress)
    : store_(store), run_(run), progress_(progress), last_flush_(std::chrono::steady_clock::now()) {}

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
  store_.add_step(run_, record);
  for (const LayerLoad& load : r.expert_load) store_.add_expert_load(run_, r.step, load.layer, load.pairs_per_expert);

  const auto now = std::chrono::steady_clock::now();
  if (r.eval_loss || std::chrono::duration<double>(now - last_flush_).count() >= kFlushEverySeconds) {
    store_.flush();
    last_flush_ = now;
  }
  progress_.update(r);
}

bool RunRecorder::stop_requested() const { return interrupt_requested(); }

}  // namespace lrmoe
