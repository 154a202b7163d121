#pragma once
// The default experiment (experiments/default.toml), compiled into the binary.

namespace lrmoe {

const char* default_experiment_toml();

}  // namespace lrmoe
