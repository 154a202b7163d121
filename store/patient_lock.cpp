#include "store/patient_lock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace lrmoe::store {
namespace {

// Said once per wait, after this long: shorter waits are the ordinary traffic of WAL mode.
constexpr std::chrono::seconds kSayAfter{5};

}  // namespace

PatientLock::PatientLock(sqlite::Database& db, std::chrono::seconds patience)
    : db_(db), patience_(patience) {
  sqlite3_busy_handler(db_.handle(), &PatientLock::on_busy, this);
}

PatientLock::~PatientLock() {
  sqlite3_busy_handler(db_.handle(), nullptr, nullptr);
}

int PatientLock::on_busy(void* self_pointer, int tries) {
  auto& self = *static_cast<PatientLock*>(self_pointer);
  const auto now = std::chrono::steady_clock::now();
  if (tries == 0 || !self.waiting_since_) {  // a new wait
    self.waiting_since_ = now;
    self.warned_ = false;
  }
  const auto waited = now - *self.waiting_since_;
  if (waited >= self.patience_) {
    self.waiting_since_.reset();
    return 0;  // the statement fails with SQLITE_BUSY, whose error says what to do
  }
  if (!self.warned_ && waited >= kSayAfter) {
    // Not "lrmoe: ": that line is kept for the one error a command ends with.
    fmt::print(stderr,
               "lrmoe warning: results database '{}': locked by another process for {} s; "
               "waiting up to {} s\n",
               self.db_.path(), kSayAfter.count(), self.patience_.count());
    self.warned_ = true;
  }
  const int backoff_ms = std::min(250, 1 << std::min(tries, 8));
  std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
  return 1;
}

}  // namespace lrmoe::store
