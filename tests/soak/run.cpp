// A batch from issue to check: on this thread in batch order, or with
// --threads from one thread per communicator the batch uses.
//
// Why threads cannot deadlock a correct engine: every rank splits a batch
// the same way (by communicator, the same plan everywhere), each thread
// issues and waits for its communicator's calls only, in the order every
// rank issues them, so a thread blocks only on its own communicator's peers,
// which run the same sequence on their own thread for it. The checks run
// here afterwards, in batch order, so a failing check reads the same as
// without threads.

#include <algorithm>
#include <thread>

#include "calls.hpp"
#include "issued.hpp"

namespace soak {

void Runner::drive(const Batch& batch, std::vector<Issued>& issued, int comm) {
  auto mine = [&](const Call& k) { return comm == kAllComms || k.comm == comm; };
  for (size_t i = 0; i < batch.calls.size(); ++i) {
    const Call& k = batch.calls[i];
    if (!mine(k)) continue;
    set_current_call(&k);
    if (k.kind == Kind::kSplit) {
      split_reversed(k);
      continue;
    }
    issued[i].call = &k;
    issued[i].comm = &(*comms_)[static_cast<size_t>(k.comm)];
    prepare(issued[i]);
    issue(issued[i]);
  }
  for (int position : batch.wait_order) {
    if (!mine(batch.calls[static_cast<size_t>(position)])) continue;
    Issued& c = issued[static_cast<size_t>(position)];
    set_current_call(c.call);
    for (size_t request : c.wait_perm) wait(c, request);
  }
  set_current_call(nullptr);
}

void Runner::run(const Batch& batch) {
  std::vector<Issued> issued(batch.calls.size());
  std::vector<int> used;
  for (const Call& k : batch.calls) {
    if (std::find(used.begin(), used.end(), k.comm) == used.end()) used.push_back(k.comm);
  }
  if (threads_ && used.size() > 1) {
    std::vector<std::thread> threads;
    threads.reserve(used.size());
    for (int comm : used) threads.emplace_back([this, &batch, &issued, comm] { drive(batch, issued, comm); });
    for (std::thread& t : threads) t.join();
  } else {
    drive(batch, issued, kAllComms);
  }
  for (size_t i = 0; i < batch.calls.size(); ++i) {
    const Call& k = batch.calls[i];
    KindCount& counted = stats_.kinds[static_cast<size_t>(k.kind)];
    (k.async ? counted.async : counted.blocking) += 1;
    counted.bytes += k.bytes;
    if (k.kind == Kind::kSplit) continue;
    set_current_call(&k);
    check(issued[i]);
  }
  set_current_call(nullptr);
}

}  // namespace soak
