#include "hooks.hpp"

#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

namespace ringreduce_torch {

namespace {

// A hook that throws must not end the thread that ran it (the Completer's
// has no one above it to catch).
template <typename Call>
void run_hook(const char* kind, Call&& call) {
  try {
    call();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringreduce: a %s hook raised: %s\n", kind, e.what());
  } catch (...) {
    std::fprintf(stderr, "ringreduce: a %s hook raised\n", kind);
  }
}

}  // namespace

uint64_t Hooks::next_key() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

#ifdef C10D_BACKEND_HAS_HOOKS

void Hooks::add_completion(int64_t id, c10d::CompletionHook hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  completion_[id] = std::move(hook);
}

void Hooks::remove_completion(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  completion_.erase(id);
}

void Hooks::add_abort(int64_t id, c10d::AbortHook hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  abort_[id] = std::move(hook);
}

void Hooks::remove_abort(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  abort_.erase(id);
}

void Hooks::completed(uint64_t key, float duration_ms) {
  std::vector<c10d::CompletionHook> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completion_.empty()) return;
    for (const auto& [id, hook] : completion_) hooks.push_back(hook);
  }
  c10d::CompletionHookArgs args;
  args.completionKey = key;
  args.duration_ms = duration_ms;
  for (const auto& hook : hooks) run_hook("completion", [&] { hook(args); });
}

void Hooks::failed(rrResult_t result) {
  if (result != rrTimeout && result != rrRemoteError) return;
  if (aborted_.exchange(true)) return;
  std::vector<c10d::AbortHook> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, hook] : abort_) hooks.push_back(hook);
  }
  for (const auto& hook : hooks) run_hook("abort", [&] { hook(); });
}

#else  // torch before 2.15: no hooks to run

void Hooks::completed(uint64_t, float) {}

void Hooks::failed(rrResult_t result) {
  if (result == rrTimeout || result == rrRemoteError) aborted_.store(true);
}

#endif

}  // namespace ringreduce_torch
