// rr-bench: collective throughput of ringreduce beside Gloo and Open MPI, in
// nccl-tests' terms and with nccl-tests' flags, every backend run on the same
// buffers and sizes in one invocation, beside this machine's memcpy bandwidth.
//
//   rr-run -n 2 rr-bench -b 1K -e 64M -f 2 --backend ringreduce --backend gloo
//   mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 rr-bench --backend ringreduce --backend mpi
//
// Under mpirun, the ranks' env:// variables come from Open MPI's
// (OMPI_COMM_WORLD_RANK/SIZE); ringreduce and Gloo still meet at
// MASTER_ADDR:MASTER_PORT, which mpirun -x must pass.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "collective.h"
#include "machine_rates.h"
#include "options.h"
#include "report.h"
#include "watchdog.h"

namespace rrbench {
namespace {

constexpr int kExitWrong = 1;
constexpr int kExitUsage = 2;

// How the ranks were started, which decides the libraries that can run.
enum class Launcher { kEnv, kMpirun };

// The backends this binary was built with, in --backend all order.
std::vector<std::string> built_libraries() {
  std::vector<std::string> built = {"ringreduce"};
#ifdef RR_BENCH_HAVE_MPI
  built.push_back("mpi");
#endif
#ifdef RR_BENCH_HAVE_GLOO
  built.push_back("gloo");
#endif
#ifdef RR_BENCH_HAVE_NCCL
  built.push_back("nccl");
#endif
  return built;
}

bool is_built(const std::string& library) {
  const auto built = built_libraries();
  return std::find(built.begin(), built.end(), library) != built.end();
}

struct Variant {
  std::string library;
  std::string name;
};

// Every backend variant rr-bench knows, built or not.
const std::vector<Variant>& known_variants() {
  static const std::vector<Variant> variants = {
      {"ringreduce", "ringreduce"},
      {"mpi", "mpi-default"},
      {"mpi", "mpi-ring"},
      {"mpi", "mpi-alg5"},
      {"gloo", "gloo-ring"},
      {"gloo", "gloo-ringchunked"},
      {"nccl", "nccl"},
  };
  return variants;
}

// --backend values to variants, in the order given, without repeats. Throws
// UsageError for names rr-bench does not know or was built without, and for
// backends this launcher cannot start.
std::vector<Variant> expand_backends(const std::vector<std::string>& names, Launcher launcher,
                                     std::vector<std::string>* notes) {
  std::vector<Variant> chosen;
  auto add = [&chosen](const Variant& variant) {
    for (const Variant& v : chosen) {
      if (v.name == variant.name) return;
    }
    chosen.push_back(variant);
  };
  for (const std::string& name : names) {
    bool matched = false;
    for (const Variant& variant : known_variants()) {
      if (name != "all" && name != variant.library && name != variant.name) continue;
      matched = true;
      if (!is_built(variant.library)) {
        if (name == "all") continue;
        throw UsageError("--backend " + name + ": rr-bench was built without " + variant.library +
                         " (meson configure -D" + variant.library + "=enabled, after scripts/setup-debian.sh)");
      }
      if (variant.library == "mpi" && launcher != Launcher::kMpirun) {
        if (name == "all") {
          const std::string note = "mpi skipped: its ranks must be started by mpirun, not rr-run";
          if (std::find(notes->begin(), notes->end(), note) == notes->end()) notes->push_back(note);
          continue;
        }
        throw UsageError("--backend " + name +
                         ": Open MPI's ranks must be started by mpirun (mpirun -np N -x MASTER_ADDR=127.0.0.1 "
                         "-x MASTER_PORT=29500 rr-bench ...); under rr-run, leave it out");
      }
      add(variant);
    }
    if (!matched) {
      throw UsageError("--backend: unknown backend '" + name +
                       "' (ringreduce, mpi, mpi-default, mpi-ring, mpi-alg5, gloo, gloo-ring, gloo-ringchunked, nccl, or all)");
    }
  }
  return chosen;
}

// Which launcher started this rank. Under mpirun, Open MPI's variables are
// copied to the env:// ones that ringreduce and Gloo read.
Launcher detect_launcher() {
  const char* ompi_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* ompi_size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (ompi_rank != nullptr && ompi_size != nullptr) {
    setenv("RANK", ompi_rank, 1);
    setenv("WORLD_SIZE", ompi_size, 1);
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) setenv("LOCAL_RANK", local, 1);
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) setenv("LOCAL_WORLD_SIZE", local, 1);
    return Launcher::kMpirun;
  }
  if (std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr) return Launcher::kEnv;
  throw UsageError(
      "no ranks to run: start rr-bench with a launcher, e.g. rr-run -n 2 rr-bench ... (env:// variables) or "
      "mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 rr-bench ...");
}

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "rr-bench: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  // No destructors: finalizing a library whose peer failed can block forever.
  std::_Exit(1);
}

// Test hook, left out of --help: RR_BENCH_INJECT_CORRUPTION=<backend> makes
// rank 0 damage one element of that backend's checked result, so a test can
// prove that -c 1 notices.
void inject_corruption(const std::string& backend, int rank, void* recv, std::size_t count, DataType type) {
  static const char* target = std::getenv("RR_BENCH_INJECT_CORRUPTION");
  if (target == nullptr || backend != target || rank != 0 || count == 0) return;
  // Bit 6 of the element's most significant byte: an exponent bit of every
  // floating type and a large change of every integer, never within tolerance.
  auto* bytes = static_cast<unsigned char*>(recv) + (count / 2) * type_size(type);
  bytes[type_size(type) - 1] ^= 0x40;
}

struct Buffers {
  std::vector<unsigned char> send;
  std::vector<unsigned char> recv;
};

struct Placement {
  bool in_place;
  const char* label;
};

class Runner {
 public:
  Runner(const Options& options, Library* control, Watchdog* watchdog)
      : options_(options), control_(control), watchdog_(watchdog) {}

  Measurement measure(Backend& backend, const RowSpec& spec, const Collective& coll, const Placement& placement) {
    const std::size_t type_bytes = type_size(spec.type);
    const std::size_t send_count = coll.send_count(spec);
    const std::size_t recv_count = coll.recv_count(spec);
    // In place, the receive buffer holds both, at the collective's offsets.
    const std::size_t recv_bytes = placement.in_place ? std::max(send_count, recv_count) * type_bytes
                                                      : recv_count * type_bytes;
    if (buffers_.send.size() < send_count * type_bytes) buffers_.send.resize(send_count * type_bytes);
    if (buffers_.recv.size() < recv_bytes) buffers_.recv.resize(recv_bytes);
    unsigned char* base = buffers_.recv.data();
    unsigned char* send = placement.in_place ? base + coll.in_place_send_offset(spec) * type_bytes : buffers_.send.data();
    unsigned char* recv = placement.in_place ? base + coll.in_place_recv_offset(spec) * type_bytes : base;
    // A call that writes nothing must fail the check, whatever an earlier
    // backend left in the output.
    std::memset(base, 0xA5, recv_bytes);
    coll.fill_input(spec, send);
    const CallArgs args{&coll,     send,    recv,      spec.count, send_count,  recv_count,
                        spec.type, spec.op, spec.root, spec.rank,  spec.nranks, placement.in_place};
    const std::string what = std::string(coll.name) + " " + std::to_string(spec.count * type_bytes) + " B " +
                             type_name(spec.type) + " " + op_name(spec.op) + " on " + backend.name() + ", " +
                             placement.label;

    watchdog_->arm(what);
    backend.prepare(args);
    backend.run(args);
    backend.wait();
    backend.fetch_result(args);
    inject_corruption(backend.name(), spec.rank, recv, recv_count, spec.type);
    double wrong = options_.check ? static_cast<double>(coll.count_wrong(spec, recv)) : -1.0;
    for (int i = 0; i < options_.warmup_iters; ++i) backend.run(args);
    backend.wait();
    control_->barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options_.iters; ++i) backend.run(args);
    backend.wait();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / options_.iters;
    watchdog_->disarm();

    // The slowest rank's time, as nccl-tests reports; wrong elements over all ranks.
    control_->allreduce_max(&seconds, 1);
    if (options_.check) control_->allreduce_sum(&wrong, 1);
    Measurement m;
    m.measured = true;
    m.time_us = seconds * 1e6;
    const double bytes = static_cast<double>(spec.count * type_bytes);
    m.algbw = alg_bandwidth(bytes, seconds);
    m.busbw = m.algbw * coll.bus_factor(spec.nranks);
    m.wrong = wrong;
    return m;
  }

 private:
  const Options& options_;
  Library* control_;
  Watchdog* watchdog_;
  Buffers buffers_;
};

std::string join_command(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  return command;
}

int run(const Options& options, std::vector<Variant> variants, Launcher launcher, const std::string& command) {
  // Libraries in the order their variants were asked for, MPI first: MPI_Init
  // must precede everything that might start threads or touch UCX.
  std::vector<std::string> library_names;
  for (const Variant& variant : variants) {
    if (std::find(library_names.begin(), library_names.end(), variant.library) == library_names.end()) {
      library_names.push_back(variant.library);
    }
  }
  std::stable_partition(library_names.begin(), library_names.end(), [](const std::string& n) { return n == "mpi"; });
  // NCCL's unique id travels over another library, made first: ringreduce's
  // when NCCL runs alone.
  const auto nccl_name = std::find(library_names.begin(), library_names.end(), "nccl");
  const bool wants_nccl = nccl_name != library_names.end();
  if (wants_nccl) library_names.erase(nccl_name);
  if (wants_nccl && library_names.empty()) library_names.push_back("ringreduce");

  const int env_rank = std::atoi(std::getenv("RANK"));
  std::vector<std::unique_ptr<Library>> libraries;
  try {
    for (const std::string& name : library_names) {
      if (name == "ringreduce") libraries.push_back(make_ringreduce_library(options.timeout_s));
#ifdef RR_BENCH_HAVE_MPI
      if (name == "mpi") libraries.push_back(make_mpi_library());
#endif
#ifdef RR_BENCH_HAVE_GLOO
      if (name == "gloo") libraries.push_back(make_gloo_library(options.gloo_store, options.timeout_s));
#endif
    }
  } catch (const BackendError& e) {
    fail(env_rank, e.what());
  }
  // The control plane: a library whose waits sleep (ringreduce, then Gloo)
  // over MPI, whose barrier spins and would take a core from rank 0 while it
  // measures memcpy alone.
  Library* control = libraries.front().get();
  for (const char* preferred : {"gloo", "ringreduce"}) {
    for (const auto& library : libraries) {
      if (library->name() == preferred) control = library.get();
    }
  }
  const int rank = control->rank();
  const int nranks = control->nranks();
#ifdef RR_BENCH_HAVE_NCCL
  if (wants_nccl) {
    // Every rank must be able to run NCCL, or none tries: a rank without a
    // GPU of its own would leave the others waiting in ncclCommInitRank.
    int device = 0;
    const std::string why = nccl_unavailable(rank, nranks, &device);
    double unable = why.empty() ? 0.0 : static_cast<double>(rank + 1);
    try {
      control->allreduce_max(&unable, 1);
      if (unable == 0) libraries.push_back(make_nccl_library(control, device, options.blocking));
    } catch (const BackendError& e) {
      fail(rank, e.what());
    }
    if (unable != 0) {
      if (rank == 0) {
        const int first = static_cast<int>(unable) - 1;
        std::printf("# nccl skipped: %s\n",
                    !why.empty() ? why.c_str()
                                 : ("rank " + std::to_string(first) + " cannot run it (its stderr says why)").c_str());
      } else if (rank == static_cast<int>(unable) - 1) {
        std::fprintf(stderr, "rr-bench: rank %d: nccl skipped: %s\n", rank, why.c_str());
      }
      variants.erase(std::remove_if(variants.begin(), variants.end(),
                                    [](const Variant& v) { return v.library == "nccl"; }),
                     variants.end());
      if (variants.empty()) {
        if (rank == 0) std::fprintf(stderr, "rr-bench: no backend left to run (nccl was the only one)\n");
        return kExitUsage;
      }
    }
  }
#endif
  for (const auto& library : libraries) {
    if (library->rank() != rank || library->nranks() != nranks) {
      fail(rank, library->name() + " sees rank " + std::to_string(library->rank()) + " of " +
                     std::to_string(library->nranks()) + ", " + control->name() + " rank " + std::to_string(rank) +
                     " of " + std::to_string(nranks));
    }
  }

  std::vector<std::unique_ptr<Backend>> backends;
  RunInfo info;
  info.command = command;
  info.launcher = launcher == Launcher::kMpirun ? "mpirun" : "env:// (rr-run)";
  info.nranks = nranks;
  info.built = built_libraries();
  info.iters = options.iters;
  info.warmup_iters = options.warmup_iters;
  info.check = options.check;
  info.blocking = options.blocking;
  try {
    for (const auto& library : libraries) info.libraries.emplace_back(library->name(), library->description());
    for (const Variant& variant : variants) {
      for (const auto& library : libraries) {
        if (library->name() == variant.library) backends.push_back(library->make_backend(variant.name));
      }
      info.backends.emplace_back(backends.back()->name(), backends.back()->settings());
    }
    // Rank 0 copies alone while the others wait: the reference is one core's.
    if (rank == 0) info.memcpy_gbps = measure_memcpy_gbps();
    control->barrier();
    // Then every rank at once: what each gets when all copy, or all reduce,
    // together; the slowest rank's rates price the allreduce bound.
    const rr::algo::MachineRates mine = measure_rates_at_once([control] { control->barrier(); });
    double seconds_per_byte[2] = {1 / mine.copy_bytes_per_s, 1 / mine.reduce_bytes_per_s};
    control->allreduce_max(seconds_per_byte, 2);
    info.rates.copy_bytes_per_s = 1 / seconds_per_byte[0];
    info.rates.reduce_bytes_per_s = 1 / seconds_per_byte[1];
  } catch (const BackendError& e) {
    fail(rank, e.what());
  }

  Report report(stdout);
  if (rank == 0) report.print_header(info);
  Watchdog watchdog(rank, options.timeout_s);
  Runner runner(options, control, &watchdog);
  const std::vector<std::size_t> sizes = sweep_sizes(options);
  const Placement kPlacements[] = {{false, "out of place"}, {true, "in place"}};
  double wrong = 0;
  uint64_t row_index = 0;
  std::vector<std::string> skip_notes;  // each reason once per backend
  try {
    for (const Collective* coll : options.collectives) {
      if (rank == 0 && options.collectives.size() > 1) {
        char factor[32];
        std::snprintf(factor, sizeof factor, "%.4g", coll->bus_factor(nranks));
        report.print_note(std::string("collective ") + coll->name + ": busbw = algbw x " + factor);
      }
      for (DataType type : options.types) {
        const std::vector<RedOp> ops = coll->has_op ? options.ops : std::vector<RedOp>{RedOp::kSum};
        for (RedOp op : ops) {
          std::vector<Backend*> able;
          for (const auto& backend : backends) {
            const std::string why = backend->unsupported(*coll, type, op);
            if (why.empty()) {
              able.push_back(backend.get());
            } else if (rank == 0) {
              const std::string note = backend->name() + " skips rows: " + why;
              if (std::find(skip_notes.begin(), skip_notes.end(), note) == skip_notes.end()) {
                skip_notes.push_back(note);
                report.print_note(note);
              }
            }
          }
          for (std::size_t size : sizes) {
            const std::size_t count = coll->row_count(size / type_size(type), nranks);
            for (std::size_t b = 0; b < able.size(); ++b) {
              Row row;
              row.backend = able[b]->name();
              row.algorithm = able[b]->algorithm(*coll, count, type);
              row.coll = coll;
              row.size = count * type_size(type);
              row.count = count;
              row.type = type;
              row.op = op;
              row.root = coll->has_root ? options.root : -1;
              if (coll->kind == CollKind::kAllReduce) {
                row.bound_busbw = allreduce_bound_busbw(row.size, nranks, info.rates);
              }
              Measurement* results[] = {&row.out_of_place, &row.in_place};
              for (int p = 0; p < 2; ++p) {
                if (kPlacements[p].in_place && !(coll->has_in_place && able[b]->runs_in_place(*coll))) {
                  continue;  // stays unmeasured: N/A
                }
                // A fresh input per row, backend and placement: a result left
                // over from an earlier call cannot pass the check.
                const uint64_t seed = ((row_index * 16 + b) * 2 + static_cast<uint64_t>(p)) + 1;
                const RowSpec spec{type, op, row.root, count, rank, nranks, seed};
                *results[p] = runner.measure(*able[b], spec, *coll, kPlacements[p]);
                if (results[p]->wrong > 0) wrong += results[p]->wrong;
              }
              able[b]->finish_row();
              if (rank == 0) report.add_row(row);
            }
            ++row_index;
          }
        }
      }
    }
  } catch (const BackendError& e) {
    fail(rank, e.what());
  }

  if (rank == 0) {
    report.print_footer(info);
    try {
      if (!options.json_path.empty()) report.write_json(options.json_path, info);
      if (!options.csv_path.empty()) report.write_csv(options.csv_path, info);
    } catch (const std::exception& e) {
      fail(rank, e.what());
    }
  }
  if (wrong > 0) {
    if (rank == 0) std::fprintf(stderr, "rr-bench: %.0f wrong elements (see #wrong)\n", wrong);
    std::fflush(stdout);
    std::fflush(stderr);
  }
  // Backends before their libraries; libraries in reverse order of creation,
  // so MPI_Finalize comes last.
  backends.clear();
  while (!libraries.empty()) libraries.pop_back();
  return wrong > 0 ? kExitWrong : 0;
}

}  // namespace
}  // namespace rrbench

int main(int argc, char** argv) {
  using namespace rrbench;
  Options options;
  std::vector<Variant> variants;
  Launcher launcher = Launcher::kEnv;
  std::vector<std::string> notes;
  try {
    options = parse_options(argc, argv);
    if (options.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (options.list_backends) {
      for (const std::string& name : built_libraries()) std::printf("%s\n", name.c_str());
      return 0;
    }
    // Names first, so a typo is reported even without a launcher.
    variants = expand_backends(options.backends, Launcher::kMpirun, &notes);
    launcher = detect_launcher();
    notes.clear();
    variants = expand_backends(options.backends, launcher, &notes);
    if (variants.empty()) throw UsageError("--backend all: no built backend can run under this launcher");
    const bool needs_master = std::any_of(variants.begin(), variants.end(), [&](const Variant& v) {
      return v.library == "ringreduce" || (v.library == "gloo" && options.gloo_store.empty());
    });
    if (launcher == Launcher::kMpirun && needs_master &&
        (std::getenv("MASTER_ADDR") == nullptr || std::getenv("MASTER_PORT") == nullptr)) {
      throw UsageError("under mpirun, ringreduce and gloo meet at MASTER_ADDR:MASTER_PORT: pass them with "
                       "mpirun -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 ...");
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "rr-bench: %s\n(rr-bench --help lists the flags)\n", e.what());
    return kExitUsage;
  }
  if (std::atoi(std::getenv("RANK")) == 0) {
    for (const std::string& note : notes) std::printf("# %s\n", note.c_str());
  }
  return run(options, variants, launcher, join_command(argc, argv));
}
