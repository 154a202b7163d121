#pragma once
// Each expert's backward quota agreed over processes without gathering a single pair: the
// quota-th highest score of each expert's pairs, wherever they are, found from all-reduced
// histograms (Note [Scalable selection] in docs/notes.md). Scores are ordered by a 32-bit key;
// each of up to four rounds settles one more byte of the threshold key of every expert still
// open, from a histogram of 256 bins per open expert, summed over processes. An expert closes
// early once the bin that holds its threshold is kept whole or not at all: the bytes below decide
// nothing. Then every process keeps its pairs above the threshold and, of the pairs at it (whose
// settled bytes equal it), as many as the quota still needs, allotted in process order and pair
// order within a process: the pairs the exact plan (one process seeing every pair, ties to the
// earlier pair) keeps.
//
// The search is a value driven by its caller, who sums the histograms over processes (one
// all-reduce per round) and then every home rank's pairs above and at the threshold (one more),
// so that tests can run many processes' searches in lockstep; kept_over_processes drives it over
// a run's processes.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/distributed/collectives.hpp"
#include "core/pipeline/process_view.hpp"

namespace lrmoe {

// Order-preserving key of a finite float: a > b exactly when score_key(a) > score_key(b), and
// -0 and +0 share a key.
uint32_t score_key(float score);

// [experts * ranks_per_process + 1]: where each (expert, home rank) group of this process's pairs
// begins in pair order (Note [Pair order]), group e * ranks_per_process + (h - first rank) for
// home rank h; `groups`: [ranks * experts] pairs per (home rank, expert), the entries of this
// process's ranks its own.
std::vector<int64_t> home_group_offsets(const std::vector<int64_t>& groups, int64_t num_experts,
                                        const ProcessView& process);

class QuotaThresholdSearch {
 public:
  static constexpr int kRounds = 4;  // one byte of the key each, at most
  static constexpr int64_t kBins = 256;
  // A bin counts one expert's pairs over every process, fewer than 2^31 (the search refuses
  // more): int32, half the bytes of int64 to clear, sum and read a round.
  using Count = int32_t;
  // Bins a threshold's scan sums at a time before it walks them one by one.
  static constexpr int64_t kScanBlock = 16;

  // group_offsets: this process's pairs by (expert, home rank), as home_group_offsets gives them;
  // scores: [n] float32, finite, in pair order; quota: [experts] pairs each expert keeps over all
  // processes; pairs: [experts] each expert's pairs over all processes, exactly (the first round
  // takes them for its histogram rows' sums), or empty if unknown. An expert whose quota is 0, or
  // at least its pairs, needs no round: it keeps none, or all, and its scores are not read.
  QuotaThresholdSearch(std::vector<int64_t> group_offsets, const ProcessView& process,
                       const torch::Tensor& scores, std::vector<int64_t> quota,
                       const std::vector<int64_t>& pairs = {});

  // Whether every expert's threshold is known: no expert is open, or four rounds are done.
  bool done() const { return open_.empty(); }
  // [open experts, kBins] int32 on the CPU, the open experts in increasing order: this process's
  // pairs per bin of the current round's byte, among the pairs whose higher bytes equal their
  // expert's threshold so far. The caller sums it over processes (an all-reduce, in place) and
  // hands the sum to narrow(). It is the search's own buffer, each round's in the first rows of
  // the first round's, and valid until the next call: the search does not read it, so summing
  // into it is safe. The first round's is counted as the keys are made.
  torch::Tensor local_histogram();
  void narrow(const torch::Tensor& global_histogram);
  // The rows of each round's histogram so far: the experts open in it.
  const std::vector<int64_t>& rounds() const { return rounds_; }

  // When done. [2, ranks, experts] int64 on the CPU: this process's pairs above (0) and at (1)
  // their expert's threshold, per (home rank, expert). The caller sums it over processes (an
  // all-reduce) and hands the sum to the two below. It lays out the kept candidates too.
  torch::Tensor local_groups();
  // [ranks * experts]: pairs kept per (home rank, expert) over every process: those above the
  // threshold and, of those at it, as many as the quota still needs, in home rank order (an
  // expert's pairs run by home rank in pair order: Note [Pair order]).
  std::vector<int64_t> kept_groups(const torch::Tensor& summed_groups) const;
  // [k] int64 on the CPU, increasing: the pairs this process keeps (their indices among its n).
  // Once, after local_groups(): it keeps those candidates in place.
  torch::Tensor kept(const torch::Tensor& summed_groups);

  // Over all processes, per expert: the pairs above the threshold (its settled bytes), and how
  // many of the pairs at it are kept. above + ties_kept is min(max(quota, 0), pairs). An expert
  // closed early counts its threshold's bin as at it, though some of its pairs lie above the
  // quota-th score.
  const std::vector<int64_t>& above() const { return above_; }
  const std::vector<int64_t>& ties_kept() const { return need_; }

 private:
  // An expert's pairs' standing against its threshold once done: none, all, or by the settled
  // bytes of their keys.
  enum class Decided : signed char { None, All, ByKey };
  // Where the current round's byte is in a key.
  int byte_shift() const;
  // visit(i) for each undecided pair i of an open expert, in pair order.
  template <typename Visit>
  void for_each_undecided(int64_t expert, Visit visit) const;
  int64_t begin(int64_t expert) const;
  // Row `row` of a [rows, kBins] histogram, zeroed in place.
  static Count* zeroed_row(torch::Tensor& histogram, int64_t row);
  int64_t end(int64_t expert) const;

  ProcessView process_;
  std::vector<int64_t> group_offsets_;
  int64_t num_experts_ = 0;
  // Each pair's order-preserving key (score_key); only an expert with rounds has its keys set.
  std::unique_ptr<uint32_t[]> key_;
  // After the first round, the pairs not yet decided: an open expert e's, whose settled bytes
  // match its threshold's, are undecided_[begin(e), begin(e) + undecided_count_[e]). Before it,
  // every pair of an open expert.
  std::unique_ptr<uint32_t[]> undecided_;
  std::vector<int64_t> undecided_count_;
  std::vector<Decided> decided_;
  // [experts] the threshold's settled bytes, and the shift that takes a key's to compare.
  std::vector<uint32_t> prefix_;
  std::vector<int> prefix_shift_;
  std::vector<int64_t> quota_;
  // Each expert's pairs over all processes were given: an open expert's quota is below them, so
  // the first round need not sum its histogram row to cap the quota.
  bool pairs_known_ = false;
  std::vector<int64_t> open_;  // the experts whose threshold still needs a byte, increasing
  // [first round's open experts, kBins] int32: each round's local histogram in its first rows
  torch::Tensor histogram_;
  // From local_groups() to kept(): this process's pairs above or at their expert's threshold, or
  // all of an expert that keeps all, in pair order, expert e's at [candidate_offsets_[e],
  // candidate_offsets_[e + 1]); and each expert's pairs here at its threshold.
  torch::Tensor candidates_;
  std::vector<int64_t> candidate_offsets_;
  std::vector<int64_t> local_at_;
  std::vector<int64_t> rounds_;  // rows of each round's histogram
  std::vector<int64_t> above_;   // [experts] pairs known to lie above the threshold
  // [experts] pairs still to keep among those whose settled bytes match the threshold's
  std::vector<int64_t> need_;
};

// What the processes agree on: this process's kept pairs, [k] int64 on the device of
// `experts`, increasing indices; `groups` [ranks * experts], pairs kept per (home rank, expert)
// over every process; and the histogram rows of each round, which the cost model charges.
struct KeptOverProcesses {
  torch::Tensor kept;
  std::vector<int64_t> groups;
  std::vector<int64_t> rounds;
};

// The search run over the processes of `collectives`: each expert e keeps its quota[e]
// highest-scored pairs over every process, ties to the earlier pair in pair order.
// group_offsets: this process's pairs by (expert, home rank) (home_group_offsets); scores: [n]
// float32 in pair order; pairs: [experts] each expert's pairs over every process. The kept pairs
// go to the scores' device. Up to five all-reduces: the rounds' histograms, then the groups.
KeptOverProcesses kept_over_processes(Collectives& collectives, std::vector<int64_t> group_offsets,
                                      const torch::Tensor& scores, std::vector<int64_t> quota,
                                      const std::vector<int64_t>& pairs,
                                      const ProcessView& process);

}  // namespace lrmoe
