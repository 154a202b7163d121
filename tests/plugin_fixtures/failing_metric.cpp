// A metric named "failing_metric" that loads and is created fine, then takes the process down
// from score() in the way LRMOE_FIXTURE_CASE says: 1 an invalid memory access (SIGSEGV), 2
// abort(), 3 exit(0), 4 a call that never returns, 5 an invalid memory access in process 1 of a
// multi-process run only (RANK=1), the others waiting for it in their next collective. A run using
// it must end with one line naming the plugin, its library and the call, and be recorded failed
// (Note [Plugin failures]).
#include <lrmoe/plugin.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

class Failing : public lrmoe::MetricPolicy {
 public:
  explicit Failing(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch& pairs) override {
#if LRMOE_FIXTURE_CASE == 1 || LRMOE_FIXTURE_CASE == 5
    const char* rank = std::getenv("RANK");
    if (LRMOE_FIXTURE_CASE == 1 || (rank != nullptr && std::string(rank) == "1")) {
      int* volatile nowhere = nullptr;  // volatile: the compiler cannot see that it is null
      *nowhere = 1;
    }
#elif LRMOE_FIXTURE_CASE == 2
    std::abort();
#elif LRMOE_FIXTURE_CASE == 3
    std::exit(0);
#else
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
#endif
    return at::ones({pairs.experts.size(0)});
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Failing>("failing_metric", "0.1.0",
                                         "takes the process down from score()");
}

}  // namespace

LRMOE_PLUGIN(describe)
