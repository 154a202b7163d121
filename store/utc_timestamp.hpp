#pragma once
// Timestamps as the results database stores them: UTC text 'YYYY-MM-DDTHH:MM:SS.mmmZ', which
// sorts and compares correctly as plain text in SQL.

#include <string>

namespace lrmoe::store {

std::string utc_timestamp_now();

}  // namespace lrmoe::store
