#pragma once
// The hf folder's error type, in a header of its own so that its lowest file (the safetensors
// reader) throws it without including the import or export.

#include <stdexcept>

namespace lrmoe {

// A Hugging Face folder or safetensors file that cannot be read or written as asked: what() is
// one line naming the file (and the tensor) and saying what to do.
class HfError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lrmoe
