#pragma once
// The config folder's error type, in a header of its own so that the lowest files of the folder
// (the Hugging Face config reader, the checks) throw it without including the loader.

#include <stdexcept>

namespace lrmoe {

// A user-caused configuration problem. what() is one line that starts with the place,
// "FILE:LINE:COLUMN: " (or "--set section.key: " for an override), and says what to do.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lrmoe
