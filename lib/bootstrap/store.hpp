#pragma once
// A rendezvous key-value store: how ranks find each other before any
// transport exists. Keys are written once; get() waits for a key to appear.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace rr::bootstrap {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  // Publishes `value` under `key`; a later set of the same key replaces it.
  virtual Status set(const std::string& key, const Bytes& value) = 0;
  // Waits until `key` exists or `deadline` passes (then kTimeout, naming the key).
  virtual Status get(const std::string& key, Clock::time_point deadline, Bytes* value) = 0;
  // Atomically adds `delta` to the integer counter `key` (absent = 0); returns the new value.
  virtual Status add(const std::string& key, int64_t delta, Clock::time_point deadline,
                     int64_t* result) = 0;
};

}  // namespace rr::bootstrap
