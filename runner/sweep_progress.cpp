#include "runner/sweep_progress.hpp"

#include <fmt/format.h>

#include <numeric>
#include <utility>

#include "runner/duration_text.hpp"

namespace lrmoe {

SweepProgress::SweepProgress(std::string name, SweepTally tally)
    : name_(std::move(name)), tally_(tally) {}

void SweepProgress::started() {
  changed_ = true;
}

void SweepProgress::finished(double seconds) {
  ++tally_.finished;
  seconds_.push_back(seconds);
  changed_ = true;
}

void SweepProgress::failed() {
  ++tally_.failed;
  changed_ = true;
}

void SweepProgress::stopped() {
  ++tally_.stopped;
  changed_ = true;
}

void SweepProgress::show(int64_t left, int64_t running, int64_t jobs) {
  if (!changed_ && !line_.live()) return;
  const bool changed = std::exchange(changed_, false);
  // The mean time of a cell finished here, over the cells still to run, `jobs` at a time.
  std::string eta = "-";
  if (!seconds_.empty()) {
    const double mean = std::accumulate(seconds_.begin(), seconds_.end(), 0.0) /
                        static_cast<double>(seconds_.size());
    eta = duration_text(mean * static_cast<double>(left + running) / static_cast<double>(jobs));
  }
  std::string line = fmt::format("sweep {}  {}/{} done  {} running  {} left", name_,
                                 tally_.finished, tally_.cells, running, left);
  if (tally_.failed > 0) line += fmt::format("  {} failed", tally_.failed);
  if (tally_.stopped > 0) line += fmt::format("  {} stopped", tally_.stopped);
  if (tally_.elsewhere > 0) line += fmt::format("  {} running elsewhere", tally_.elsewhere);
  line += "  ETA " + eta;
  line_.show(line, changed);
}

void SweepProgress::finish() {
  line_.finish();
}

}  // namespace lrmoe
