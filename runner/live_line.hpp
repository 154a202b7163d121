#pragma once
// A progress line for a person: on a terminal one line rewritten in place, the updates the
// caller asks to keep left above it as a history; elsewhere (logs, CI) only those, one line each.

#include <string>

namespace lrmoe {

class LiveLine {
 public:
  LiveLine();
  // Whether stdout is a terminal, where every update rewrites the line.
  bool live() const { return live_; }
  // If `keep`, prints the line as a line of its own (on a terminal in place of the live line,
  // which the next update starts again below it); else, on a terminal, rewrites the live line.
  void show(const std::string& line, bool keep);
  // Ends a rewritten line so that later output starts on a fresh one.
  void finish();

 private:
  bool live_;
  bool open_ = false;
};

}  // namespace lrmoe
