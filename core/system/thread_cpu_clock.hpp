#pragma once
// The calling thread's CPU time, and the same less what the thread spent inside collectives:
// the plan's own work, which a replay of several processes as threads times (PlanClock, Note
// [Replay] in docs/notes.md). A collective's cost is the cost model's to charge, and a thread
// standing for a process does a share of every collective's copying that a process would leave
// to its network or GPU.

namespace lrmoe {

// CPU seconds the calling thread has run (user and system).
double thread_cpu_seconds();

// thread_cpu_seconds() less the time spent inside CollectiveCpuScopes on this thread.
double thread_work_cpu_seconds();

// Marks the thread inside a collective from construction to destruction, when `active`. A scope
// inside another (a collective made of others) counts nothing of its own.
class CollectiveCpuScope {
 public:
  explicit CollectiveCpuScope(bool active);
  ~CollectiveCpuScope();
  CollectiveCpuScope(const CollectiveCpuScope&) = delete;
  CollectiveCpuScope& operator=(const CollectiveCpuScope&) = delete;

 private:
  bool active_;
  double started_ = 0;
};

}  // namespace lrmoe
