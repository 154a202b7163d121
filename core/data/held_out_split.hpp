#pragma once
// Where a flat token array's validation tokens lie (Note [Held-out split]): val_fraction of the
// tokens, as the tails of up to kMaxValidationSegments equal parts of the array, so that a corpus
// made of documents in sequence is evaluated on all of them, not on its last document alone.
// A small array keeps one part: its last val_fraction is the validation split.

#include <cstdint>
#include <vector>

namespace lrmoe {

// Tokens [begin, end) of the array.
struct TokenSegment {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// One split's segments, and the window starts they offer, numbered across segments.
class SplitSegments {
 public:
  SplitSegments() = default;
  // Windows of `window` tokens that lie inside one segment; segments shorter than a window offer
  // none.
  SplitSegments(std::vector<TokenSegment> segments, int64_t window);

  const std::vector<TokenSegment>& segments() const { return segments_; }
  int64_t tokens() const;
  // How many windows start inside a segment and end inside it.
  int64_t window_starts() const { return starts_before_.back(); }
  // The array position of window start `index`, 0 <= index < window_starts().
  int64_t start(int64_t index) const;

 private:
  std::vector<TokenSegment> segments_;
  int64_t window_ = 1;
  std::vector<int64_t> starts_before_{0};  // [segments + 1]: prefix sums of the window starts
};

struct HeldOutSplit {
  SplitSegments train;
  SplitSegments validation;
};

// At most this many validation segments; each part holds at least kMinPartWindows windows in
// each split, so that a part's boundary cuts few windows.
inline constexpr int64_t kMaxValidationSegments = 20;
inline constexpr int64_t kMinPartWindows = 16;

// The split of `total` tokens for windows of `window` tokens. Either split may be shorter than a
// window; the caller refuses that.
HeldOutSplit held_out_split(int64_t total, double val_fraction, int64_t window);

}  // namespace lrmoe
