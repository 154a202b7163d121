#pragma once
// A progress line for a person: on a terminal one line rewritten in place, elsewhere (logs, CI)
// one line printed per update the caller asks to keep.

#include <string>

namespace lrmoe {

class LiveLine {
 public:
  LiveLine();
  // Whether stdout is a terminal, where every update rewrites the line.
  bool live() const { return live_; }
  // On a terminal rewrites the line; elsewhere prints it as a line of its own if `keep`.
  void show(const std::string& line, bool keep);
  // Ends a rewritten line so that later output starts on a fresh one.
  void finish();

 private:
  bool live_;
  bool open_ = false;
};

}  // namespace lrmoe
