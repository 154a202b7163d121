#pragma once
// A flat sequence of token ids, whatever holds it (bytes in memory, a memory-mapped file of
// uint16 or uint32), from which training and evaluation windows are cut.

#include <cstdint>

namespace lrmoe {

class TokenArray {
 public:
  virtual ~TokenArray() = default;
  virtual int64_t size() const = 0;
  // Copies tokens [begin, begin + count) to `out`; the range lies inside [0, size()).
  virtual void copy(int64_t begin, int64_t count, int64_t* out) const = 0;
};

}  // namespace lrmoe
