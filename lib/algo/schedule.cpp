#include "algo/schedule.hpp"

#include <cstddef>

namespace rr::algo {

namespace {

struct Row {
  Schedule schedule;
  const char* word;  // errors
  const char* name;  // rrCommGetAlgorithm
};

constexpr Row kTable[] = {
    {Schedule::kNone, "", "unknown"},
    {Schedule::kLocalCopy, "local copy", "local copy"},
    {Schedule::kRing, "ring", "ring"},
    {Schedule::kSameHostRing, "ring", "ring (shared memory)"},
    {Schedule::kRecursiveDoubling, "recursive doubling", "recursive doubling"},
    {Schedule::kHalvingDoubling, "halving-doubling", "halving-doubling"},
    {Schedule::kOneShot, "one-shot", "one-shot (shared memory)"},
    {Schedule::kBinomialTree, "binomial tree", "binomial tree"},
    {Schedule::kChain, "chain", "chain"},
    {Schedule::kDirect, "direct", "direct"},
    {Schedule::kArgumentCheck, "argument check", "argument check"},
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == static_cast<size_t>(Schedule::kLast) + 1,
              "one row per schedule");

constexpr bool in_order() {
  for (size_t i = 0; i < sizeof(kTable) / sizeof(kTable[0]); ++i) {
    if (static_cast<size_t>(kTable[i].schedule) != i) return false;
  }
  return true;
}
static_assert(in_order(), "rows in the enum's order");

const Row& row(Schedule s) {
  const auto i = static_cast<size_t>(s);
  return i < sizeof(kTable) / sizeof(kTable[0]) ? kTable[i] : kTable[0];
}

}  // namespace

const char* schedule_name(Schedule s) { return row(s).name; }
const char* schedule_word(Schedule s) { return row(s).word; }

Schedule allreduce_schedule(AllreduceAlgo chosen, bool same_host) {
  switch (chosen) {
    case AllreduceAlgo::kRecursiveDoubling: return Schedule::kRecursiveDoubling;
    case AllreduceAlgo::kHalvingDoubling: return Schedule::kHalvingDoubling;
    case AllreduceAlgo::kOneShot: return Schedule::kOneShot;
    case AllreduceAlgo::kRing:
    case AllreduceAlgo::kAuto: break;
  }
  return same_host ? Schedule::kSameHostRing : Schedule::kRing;
}

}  // namespace rr::algo
