#pragma once
// Reading a results database that a child process is still writing.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "store/results_store.hpp"

namespace lrmoe_test {

inline int64_t steps_recorded(const std::string& db) {
  auto result = lrmoe::ResultsStore::open_read_only(db)->query("SELECT COUNT(*) FROM steps");
  return std::stoll(result.rows[0][0].value());
}

// Waits (at most a minute) until `db` holds at least `wanted` committed steps.
inline void wait_for_steps(const std::string& db, int64_t wanted) {
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      if (std::filesystem::exists(db) && steps_recorded(db) >= wanted) return;
    } catch (const lrmoe::StoreError&) {
      // the database is being created
    }
  }
  FAIL("no steps were recorded in time");
}

}  // namespace lrmoe_test
