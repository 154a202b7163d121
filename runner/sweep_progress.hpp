#pragma once
// A sweep's progress for a person: on a terminal one live line rewritten in place (cells done,
// running, left, failed, ETA); otherwise a line whenever a cell starts or ends.

#include <cstdint>
#include <string>
#include <vector>

#include "runner/live_line.hpp"

namespace lrmoe {

struct SweepTally {
  int64_t cells = 0;
  int64_t finished = 0;   // their last run finished
  int64_t failed = 0;     // their last run failed
  int64_t stopped = 0;    // stopped by Ctrl-C in this invocation
  int64_t elsewhere = 0;  // being run by another process now
};

class SweepProgress {
 public:
  // `tally`: the cells as found in the database before this invocation ran any.
  SweepProgress(std::string name, SweepTally tally);
  void started();
  void finished(double seconds);
  void failed();
  void stopped();
  // Shows the line when something changed (on a terminal also the ETA, every call).
  void show(int64_t left, int64_t running, int64_t jobs);
  // Ends the live line.
  void finish();
  const SweepTally& tally() const { return tally_; }

 private:
  std::string name_;
  SweepTally tally_;
  std::vector<double> seconds_;  // of the cells finished in this invocation
  LiveLine line_;
  bool changed_ = true;
};

}  // namespace lrmoe
