#pragma once
// One-line charts of a series (a loss curve) for the terminal.

#include <cstddef>
#include <string>
#include <vector>

namespace lrmoe {

// `values` drawn with the block characters ▁▂▃▄▅▆▇█, lowest to highest. More values than
// `width` are averaged in `width` consecutive buckets of (nearly) equal size; fewer are drawn one
// character each, so that nothing is invented. Non-finite values (a diverged loss) are left out
// of the averages, and a bucket with nothing left prints as a space. Empty input or a zero
// width gives ""; a constant series gives a flat line of ▁.
std::string sparkline(const std::vector<double>& values, size_t width);

}  // namespace lrmoe
