#include "report.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace rrbench {

namespace {

const char* redop_column(const Row& row) { return row.coll->has_op ? op_name(row.op) : "none"; }

// Out-of-place busbw over the bound's; 0 where the row has no bound.
double over_bound(const Row& row) {
  return row.bound_busbw > 0 && row.out_of_place.measured ? row.out_of_place.busbw / row.bound_busbw : 0.0;
}

// The bus/bound column: "-" where the row has no bound.
std::string format_bound(const Row& row) {
  if (!(row.bound_busbw > 0 && row.out_of_place.measured)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", over_bound(row));
  return text;
}

std::string format_wrong(double wrong) {
  if (wrong < 0) return "N/A";
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", wrong);
  return text;
}

using Json = nlohmann::ordered_json;

// JSON has no NaN or infinity: a time that is not finite is written as null.
Json json_number(double value) {
  if (!std::isfinite(value)) return nullptr;
  return value;
}

Json json_measurement(const Measurement& m) {
  if (!m.measured) return nullptr;
  return Json{{"time_us", json_number(m.time_us)},
              {"algbw_GBps", json_number(m.algbw)},
              {"busbw_GBps", json_number(m.busbw)},
              {"wrong", m.wrong < 0 ? Json(nullptr) : json_number(m.wrong)}};
}

// Per backend, in order of first appearance: mean busbw over every row and placement.
std::vector<std::pair<std::string, double>> average_busbw(const std::vector<Row>& rows) {
  std::vector<std::pair<std::string, double>> averages;
  std::map<std::string, std::pair<double, int>> sums;
  for (const Row& row : rows) {
    auto found = sums.find(row.backend);
    if (found == sums.end()) {
      averages.emplace_back(row.backend, 0.0);
      found = sums.emplace(row.backend, std::make_pair(0.0, 0)).first;
    }
    for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
      if (!m->measured) continue;
      found->second.first += m->busbw;
      found->second.second += 1;
    }
  }
  for (auto& average : averages) {
    const auto& sum = sums[average.first];
    average.second = sum.second ? sum.first / sum.second : 0.0;
  }
  return averages;
}

FILE* open_or_throw(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  return file;
}

void close_or_throw(FILE* file, const std::string& path) {
  const bool failed = std::ferror(file) != 0;
  if (std::fclose(file) != 0 || failed) throw std::runtime_error("writing " + path + " failed: " + std::strerror(errno));
}

}  // namespace

std::string format_time_us(double time_us) {
  char text[32];
  if (time_us >= 10000.0) {
    std::snprintf(text, sizeof text, "%7.0f", time_us);
  } else if (time_us >= 100.0) {
    std::snprintf(text, sizeof text, "%7.1f", time_us);
  } else {
    std::snprintf(text, sizeof text, "%7.2f", time_us);
  }
  return text;
}

void Report::print_header(const RunInfo& info) {
  memcpy_gbps_ = info.memcpy_gbps;
  std::fprintf(out_, "# rr-bench: %s\n", info.command.c_str());
  std::fprintf(out_, "# %d ranks under %s; %d iterations after %d warm-up; check %s; blocking %d "
                     "(host-buffer backends block on every call; nccl obeys it)\n",
               info.nranks, info.launcher.c_str(), info.iters, info.warmup_iters, info.check ? "on" : "off",
               info.blocking ? 1 : 0);
  std::string built;
  for (const std::string& name : info.built) built += (built.empty() ? "" : ", ") + name;
  std::fprintf(out_, "# built with: %s\n", built.c_str());
  for (const auto& library : info.libraries) {
    std::fprintf(out_, "# library %-11s %s\n", library.first.c_str(), library.second.c_str());
  }
  for (const auto& backend : info.backends) {
    std::fprintf(out_, "# backend %-17s %s\n", backend.first.c_str(), backend.second.c_str());
  }
  std::fprintf(out_, "# physical reference: single-thread memcpy %.2f GB/s (rank 0, 256 MiB, best of 5)\n",
               info.memcpy_gbps);
  std::fprintf(out_, "# memory at once: every rank copying %.2f GB/s, reducing %.2f GB/s (the slowest rank's, "
                     "256 MiB copies, float32 sums in the caches)\n",
               info.rates.copy_bytes_per_s / 1e9, info.rates.reduce_bytes_per_s / 1e9);
  std::fprintf(out_, "# time: the slowest rank's mean per call; algbw = size / time; busbw = algbw x the "
                     "collective's factor; bus/cpy = out-of-place busbw / memcpy; bus/bound = out-of-place busbw / "
                     "the busbw the memory traffic allows (allreduce)\n");
  std::fprintf(out_, "#\n");
  // The placement labels centred over their four columns (33 characters
  // each, after the 52 of size..root), as nccl-tests lays them out.
  std::string groups = "#" + std::string(51, ' ');
  for (const char* label : {"out-of-place", "in-place"}) {
    const std::size_t width = 33, length = std::strlen(label);
    const std::size_t left = (width - length) / 2 + 1;
    groups += std::string(left, ' ') + label + std::string(width - left - length, ' ');
  }
  std::fprintf(out_, "%s\n", groups.c_str());
  std::fprintf(out_, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %9s  %s\n", "size",
               "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
               "#wrong", "bus/cpy", "bus/bound", "backend (algorithm)");
  std::fprintf(out_, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %9s  %s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "", "", "");
  std::fflush(out_);
}

void Report::print_note(const std::string& line) {
  std::fprintf(out_, "# %s\n", line.c_str());
  std::fflush(out_);
}

void Report::add_row(const Row& row) {
  rows_.push_back(row);
  std::fprintf(out_, "%12zu  %12zu  %8s  %6s  %6d", row.size, row.count, type_name(row.type), redop_column(row),
               row.root);
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    if (m->measured) {
      std::fprintf(out_, "  %7s  %6.2f  %6.2f  %6s", format_time_us(m->time_us).c_str(), m->algbw, m->busbw,
                   format_wrong(m->wrong).c_str());
    } else {
      std::fprintf(out_, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    }
  }
  std::fprintf(out_, "  %7.3f  %9s  %s%s%s%s\n", memcpy_gbps_ > 0 ? row.out_of_place.busbw / memcpy_gbps_ : 0.0,
               format_bound(row).c_str(), row.backend.c_str(), row.algorithm.empty() ? "" : " (", row.algorithm.c_str(),
               row.algorithm.empty() ? "" : ")");
  std::fflush(out_);
}

void Report::print_footer(const RunInfo& info) {
  const double wrong = total_wrong();
  std::fprintf(out_, "# Out of bounds values : %.0f %s\n", wrong, wrong == 0 ? "OK" : "FAILED");
  for (const auto& average : average_busbw(rows_)) {
    std::fprintf(out_, "# Avg bus bandwidth    : %.3f GB/s  (%.3f x memcpy)  %s\n", average.second,
                 info.memcpy_gbps > 0 ? average.second / info.memcpy_gbps : 0.0, average.first.c_str());
  }
  std::fprintf(out_, "#\n");
  std::fflush(out_);
}

double Report::total_wrong() const {
  double wrong = 0;
  for (const Row& row : rows_) {
    if (row.out_of_place.wrong > 0) wrong += row.out_of_place.wrong;
    if (row.in_place.wrong > 0) wrong += row.in_place.wrong;
  }
  return wrong;
}

void Report::write_json(const std::string& path, const RunInfo& info) const {
  Json doc;
  doc["tool"] = "rr-bench";
  doc["command"] = info.command;
  doc["launcher"] = info.launcher;
  doc["nranks"] = info.nranks;
  doc["iters"] = info.iters;
  doc["warmup_iters"] = info.warmup_iters;
  doc["check"] = info.check;
  doc["memcpy_GBps"] = json_number(info.memcpy_gbps);
  doc["copy_at_once_GBps"] = json_number(info.rates.copy_bytes_per_s / 1e9);
  doc["reduce_at_once_GBps"] = json_number(info.rates.reduce_bytes_per_s / 1e9);
  doc["built"] = info.built;
  Json& libraries = doc["libraries"] = Json::object();
  for (const auto& [name, version] : info.libraries) libraries[name] = version;
  Json& backends = doc["backends"] = Json::object();
  for (const auto& [name, what] : info.backends) backends[name] = what;
  Json& rows = doc["rows"] = Json::array();
  for (const Row& row : rows_) {
    const double ratio = info.memcpy_gbps > 0 ? row.out_of_place.busbw / info.memcpy_gbps : 0.0;
    rows.push_back(Json{{"backend", row.backend},
                        {"algorithm", row.algorithm},
                        {"collective", row.coll->name},
                        {"size", row.size},
                        {"count", row.count},
                        {"type", type_name(row.type)},
                        {"redop", redop_column(row)},
                        {"root", row.root},
                        {"bus_factor", json_number(row.coll->bus_factor(info.nranks))},
                        {"out_of_place", json_measurement(row.out_of_place)},
                        {"in_place", json_measurement(row.in_place)},
                        {"busbw_over_memcpy", json_number(ratio)},
                        {"bound_busbw_GBps", json_number(row.bound_busbw)},
                        {"busbw_over_bound", json_number(over_bound(row))}});
  }
  Json& averages = doc["avg_busbw_GBps"] = Json::object();
  for (const auto& [backend, busbw] : average_busbw(rows_)) averages[backend] = json_number(busbw);
  doc["wrong"] = json_number(total_wrong());
  FILE* file = open_or_throw(path);
  // A library's version string is not ours to trust as UTF-8.
  const std::string text = doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  std::fputs(text.c_str(), file);
  close_or_throw(file, path);
}

void Report::write_csv(const std::string& path, const RunInfo& info) const {
  FILE* file = open_or_throw(path);
  std::fprintf(file,
               "backend,collective,nranks,size,count,type,redop,root,"
               "oop_time_us,oop_algbw_GBps,oop_busbw_GBps,oop_wrong,"
               "ip_time_us,ip_algbw_GBps,ip_busbw_GBps,ip_wrong,memcpy_GBps,busbw_over_memcpy,"
               "bound_busbw_GBps,busbw_over_bound,algorithm\n");
  for (const Row& row : rows_) {
    std::fprintf(file, "%s,%s,%d,%zu,%zu,%s,%s,%d", row.backend.c_str(), row.coll->name, info.nranks, row.size,
                 row.count, type_name(row.type), redop_column(row), row.root);
    for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
      if (m->measured) {
        std::fprintf(file, ",%.3f,%.4f,%.4f,%s", m->time_us, m->algbw, m->busbw,
                     m->wrong < 0 ? "" : format_wrong(m->wrong).c_str());
      } else {
        std::fprintf(file, ",,,,");
      }
    }
    std::fprintf(file, ",%.3f,%.4f,%.4f,%.4f,%s\n", info.memcpy_gbps,
                 info.memcpy_gbps > 0 ? row.out_of_place.busbw / info.memcpy_gbps : 0.0, row.bound_busbw,
                 over_bound(row), row.algorithm.c_str());
  }
  close_or_throw(file, path);
}

}  // namespace rrbench
