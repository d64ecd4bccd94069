// What rr-bench prints (nccl-tests' table, on rank 0) and writes (--json,
// --csv): the rows, the backends and their settings, and the physical
// reference each row's bus bandwidth is compared with.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "algo/memory_traffic.hpp"
#include "collective.h"
#include "dtype.h"

namespace rrbench {

struct Measurement {
  bool measured = false;  // false: this placement does not exist for the row (N/A)
  double time_us = 0;  // the slowest rank's mean time per call
  double algbw = 0;    // GB/s
  double busbw = 0;    // GB/s
  double wrong = -1;   // wrong elements over all ranks; -1: not checked
};

struct Row {
  std::string backend;
  std::string algorithm;  // the schedule the backend's library took for the row ("" when it cannot tell)
  const Collective* coll = nullptr;
  std::size_t size = 0;   // bytes
  std::size_t count = 0;  // elements
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = -1;
  Measurement out_of_place;
  Measurement in_place;
  // The busbw the memory traffic allows (GB/s; machine_rates.h), 0 where
  // there is no model (every collective but allreduce, one rank).
  double bound_busbw = 0;
};

struct RunInfo {
  std::string command;
  std::string launcher;
  int nranks = 0;
  double memcpy_gbps = 0;  // single-thread memcpy, bytes copied per second / 1e9
  rr::algo::MachineRates rates;  // the slowest rank's, every rank copying or reducing at once
  std::vector<std::string> built;  // backends this binary was built with
  std::vector<std::pair<std::string, std::string>> libraries;  // name, description
  std::vector<std::pair<std::string, std::string>> backends;   // name, settings
  int iters = 0;
  int warmup_iters = 0;
  bool check = false;
  bool blocking = false;
};

class Report {
 public:
  explicit Report(FILE* out) : out_(out) {}

  void print_header(const RunInfo& info);
  void print_note(const std::string& line);  // "# line"
  void add_row(const Row& row);              // prints it and keeps it
  // "# Out of bounds values" and "# Avg bus bandwidth" per backend.
  void print_footer(const RunInfo& info);

  // Throw std::runtime_error naming the file when it cannot be written.
  void write_json(const std::string& path, const RunInfo& info) const;
  void write_csv(const std::string& path, const RunInfo& info) const;

  double total_wrong() const;

 private:
  FILE* out_;
  double memcpy_gbps_ = 0;
  std::vector<Row> rows_;
};

// nccl-tests' time column: fewer decimals as the time grows.
std::string format_time_us(double time_us);

}  // namespace rrbench
