#pragma once
// How a writer waits for a results database another process holds locked (a reader's long
// query, a backup, a second writer's flush). SQLite's busy timeout fails the statement after it;
// mid-run that would fail a run that may be hours old over a lock that is about to go. A patient
// lock waits longer, backing off from 1 ms to 250 ms between tries, says on stderr once that it
// is waiting and for whom, and gives up only after `patience`: the statement then fails with
// SQLITE_BUSY, and the run with it, recorded 'failed' once the lock is free.

#include <chrono>
#include <optional>

#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

class PatientLock {
 public:
  // Installs the busy handler on `db`, which must outlive this object.
  PatientLock(sqlite::Database& db, std::chrono::seconds patience);
  ~PatientLock();
  PatientLock(const PatientLock&) = delete;
  PatientLock& operator=(const PatientLock&) = delete;

 private:
  static int on_busy(void* self, int tries);

  sqlite::Database& db_;
  std::chrono::seconds patience_;
  std::optional<std::chrono::steady_clock::time_point> waiting_since_;
  bool warned_ = false;
};

}  // namespace lrmoe::store
