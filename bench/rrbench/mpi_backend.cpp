// Open MPI's MPI_Allreduce, in three configurations, each on its own
// duplicate of MPI_COMM_WORLD:
//   mpi-default  coll/tuned's fixed decision rules: what an application gets
//                with no tuning (recursive doubling, Rabenseifner or the
//                segmented ring, chosen by size and rank count);
//   mpi-ring     coll/tuned's ring forced (coll_tuned_use_dynamic_rules=1,
//                coll_tuned_allreduce_algorithm=4), the algorithm ringreduce
//                implements, so the comparison is like for like;
//   mpi-alg5     coll/tuned's segmented ring forced (algorithm 5, 1 MiB
//                segments: coll_tuned_allreduce_algorithm_segmentsize), the
//                strongest of its configurations for large messages on one
//                host (bench/RESULTS.md, "Shared memory, 2 and 4 ranks"), so
//                every sweep shows the one to beat.
// coll/tuned reads the forced algorithm and segment size when a
// communicator is created, so rr-bench sets coll_tuned_use_dynamic_rules
// before MPI_Init (as the OMPI_MCA_ variable) and writes the others through
// the MPI tools interface before duplicating each communicator: every row
// comes from one run, with no mpirun flags.

// The C API only: the deprecated C++ bindings add nothing and warn.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend.h"

extern char** environ;

namespace rrbench {

namespace {

constexpr int kTunedDefault = 0;  // "ignore": the fixed decision rules

// A forced coll/tuned allreduce: what mpi-<name> runs.
struct Forced {
  const char* variant;
  int algorithm;    // coll_tuned_allreduce_algorithm
  int segment_size; // coll_tuned_allreduce_algorithm_segmentsize (bytes; 0: none)
  const char* label;
};
constexpr Forced kDefault{"mpi-default", kTunedDefault, 0, "tuned's fixed decision rules, as with no MCA settings"};
constexpr Forced kRing{"mpi-ring", 4, 0, "ring"};
constexpr Forced kSegmentedRing{"mpi-alg5", 5, 1 << 20, "segmented ring"};
constexpr Forced kForced[] = {kDefault, kRing, kSegmentedRing};

void check(int code, const std::string& what) {
  if (code != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw BackendError(what + " failed: " + std::string(text, static_cast<std::size_t>(length)));
  }
}

MPI_Datatype to_mpi(DataType type) {
  switch (type) {
    case DataType::kInt8: return MPI_INT8_T;
    case DataType::kUint8: return MPI_UINT8_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kUint32: return MPI_UINT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kUint64: return MPI_UINT64_T;
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op to_mpi(RedOp op) {
  switch (op) {
    case RedOp::kSum: return MPI_SUM;
    case RedOp::kProd: return MPI_PROD;
    case RedOp::kMax: return MPI_MAX;
    case RedOp::kMin: return MPI_MIN;
    case RedOp::kBand: return MPI_BAND;
    case RedOp::kBor: return MPI_BOR;
    case RedOp::kBxor: return MPI_BXOR;
    default: return MPI_OP_NULL;
  }
}

// Writes an integer control variable through MPI_T and reads it back.
void write_int_cvar(const char* name, int value) {
  int count = 0;
  check(MPI_T_cvar_get_num(&count), "MPI_T_cvar_get_num");
  for (int index = 0; index < count; ++index) {
    char found[256];
    int found_length = sizeof found;
    int verbosity = 0, binding = 0, scope = 0;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    char description[1024];
    int description_length = sizeof description;
    if (MPI_T_cvar_get_info(index, found, &found_length, &verbosity, &type, &enumtype, description,
                            &description_length, &binding, &scope) != MPI_SUCCESS ||
        std::strcmp(found, name) != 0) {
      continue;
    }
    MPI_T_cvar_handle handle;
    int elements = 0;
    check(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &elements), std::string("MPI_T_cvar_handle_alloc ") + name);
    int written = value;
    int code = MPI_T_cvar_write(handle, &written);
    int read_back = -1;
    if (code == MPI_SUCCESS) code = MPI_T_cvar_read(handle, &read_back);
    MPI_T_cvar_handle_free(&handle);
    check(code, std::string("writing MPI_T control variable ") + name);
    if (read_back != value) {
      throw BackendError(std::string("MPI_T control variable ") + name + " reads " + std::to_string(read_back) +
                         " after writing " + std::to_string(value));
    }
    return;
  }
  throw BackendError(std::string("Open MPI has no control variable ") + name +
                     ": is coll/tuned excluded (OMPI_MCA_coll)? The mpi-ring and mpi-alg5 rows need it");
}

class MpiLibrary : public Library {
 public:
  MpiLibrary() {
    // Must precede MPI_Init: coll/tuned reads it when it opens. A user's
    // explicit 0 would silently turn mpi-ring and mpi-alg5 into the default; refuse it.
    const char* dynamic = std::getenv("OMPI_MCA_coll_tuned_use_dynamic_rules");
    if (dynamic != nullptr && std::strcmp(dynamic, "1") != 0 && std::strcmp(dynamic, "true") != 0) {
      throw BackendError(std::string("OMPI_MCA_coll_tuned_use_dynamic_rules=") + dynamic +
                         " would keep mpi-ring and mpi-alg5 from forcing their algorithms: unset it");
    }
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
    int provided = 0;
    check(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), "MPI_T_init_thread");
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
    // Errors come back as codes, so they are reported like every other backend's.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &nranks_), "MPI_Comm_size");
    for (size_t i = 0; i < kNumForced; ++i) comms_[i] = duplicate_with(kForced[i]);
    write_int_cvar("coll_tuned_allreduce_algorithm", kTunedDefault);
    write_int_cvar("coll_tuned_allreduce_algorithm_segmentsize", 0);
  }
  ~MpiLibrary() override {
    for (MPI_Comm& comm : comms_) MPI_Comm_free(&comm);
    MPI_T_finalize();
    MPI_Finalize();
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string description() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, static_cast<std::size_t>(length));
    text = text.substr(0, text.find_first_of(",\n"));
    // The MCA settings in force, as the user gave them (mpirun --mca or -x).
    std::string mca;
    for (char** variable = environ; *variable != nullptr; ++variable) {
      if (std::strncmp(*variable, "OMPI_MCA_", 9) == 0 && std::strncmp(*variable, "OMPI_MCA_orte", 13) != 0 &&
          std::strncmp(*variable, "OMPI_MCA_ess", 12) != 0 && std::strncmp(*variable, "OMPI_MCA_pmix", 13) != 0 &&
          std::strncmp(*variable, "OMPI_MCA_initial_wdir", 21) != 0 &&
          std::strncmp(*variable, "OMPI_MCA_mpi_oversubscribe", 26) != 0 &&
          std::strncmp(*variable, "OMPI_MCA_shmem_RUNTIME_QUERY_hint", 33) != 0) {
        mca += std::string(mca.empty() ? "" : " ") + (*variable + 9);
      }
    }
    return text + "; MCA: " + (mca.empty() ? "defaults" : mca);
  }
  std::unique_ptr<Backend> make_backend(const std::string& variant) override;

  void barrier() override { check(MPI_Barrier(comms_[0]), "MPI_Barrier"); }
  void allreduce_max(double* values, std::size_t n) override {
    check(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, comms_[0]),
          "MPI_Allreduce (max of timings)");
  }
  void allreduce_sum(double* values, std::size_t n) override {
    check(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, comms_[0]),
          "MPI_Allreduce (sum of counts)");
  }

  // The communicator made with kForced[index]'s settings.
  MPI_Comm comm(size_t index) const { return comms_[index]; }

 private:
  static constexpr size_t kNumForced = sizeof(kForced) / sizeof(kForced[0]);

  MPI_Comm duplicate_with(const Forced& forced) {
    write_int_cvar("coll_tuned_allreduce_algorithm", forced.algorithm);
    write_int_cvar("coll_tuned_allreduce_algorithm_segmentsize", forced.segment_size);
    MPI_Comm comm = MPI_COMM_NULL;
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return comm;
  }

  int rank_ = 0;
  int nranks_ = 0;
  MPI_Comm comms_[kNumForced] = {};
};

class MpiBackend : public Backend {
 public:
  MpiBackend(MpiLibrary* library, size_t index) : library_(library), index_(index), forced_(kForced[index]) {}

  std::string name() const override { return forced_.variant; }
  std::string settings() const override {
    const std::string rule = "coll_tuned_use_dynamic_rules=1 coll_tuned_allreduce_algorithm=" +
                             std::to_string(forced_.algorithm) +
                             (forced_.segment_size ? " coll_tuned_allreduce_algorithm_segmentsize=" +
                                                         std::to_string(forced_.segment_size)
                                                   : std::string()) +
                             " (" + forced_.label + ")";
    if (forced_.algorithm != kTunedDefault) return "MPI_Allreduce, " + rule;
    return "MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Reduce, MPI_Alltoall, "
           "MPI_Sendrecv; " + rule;
  }
  std::string unsupported(const Collective& coll, DataType type, RedOp op) const override {
    if (forced_.algorithm != kTunedDefault && coll.kind != CollKind::kAllReduce) {
      return "coll_tuned_allreduce_algorithm changes allreduce only (mpi-default runs this)";
    }
    if (to_mpi(type) == MPI_DATATYPE_NULL) return std::string("MPI has no ") + type_name(type) + " type";
    if (coll.has_op && to_mpi(op) == MPI_OP_NULL) return std::string("MPI has no ") + op_name(op) + " operation";
    if (coll.has_op && is_bitwise(op) && is_float(type)) {
      return std::string("MPI defines ") + op_name(op) + " for integer types only";
    }
    return {};
  }
  // MPI's in-place reduce-scatter leaves rank r's block at the start of the
  // buffer, not at r x recvcount as NCCL's does.
  bool runs_in_place(const Collective& coll) const override { return coll.kind != CollKind::kReduceScatter; }
  void run(const CallArgs& a) override {
    if (a.count > static_cast<std::size_t>(INT_MAX)) {
      throw BackendError("MPI takes int counts; " + std::to_string(a.count) + " elements is too many");
    }
    MPI_Comm comm = library_->comm(index_);
    const MPI_Datatype type = to_mpi(a.type);
    const int count = static_cast<int>(a.count);
    switch (a.coll->kind) {
      case CollKind::kAllReduce:
        check(MPI_Allreduce(a.in_place ? MPI_IN_PLACE : a.send, a.recv, count, type, to_mpi(a.op), comm),
              "MPI_Allreduce");
        return;
      case CollKind::kReduceScatter:
        check(MPI_Reduce_scatter_block(a.send, a.recv, static_cast<int>(a.recv_count), type, to_mpi(a.op), comm),
              "MPI_Reduce_scatter_block");
        return;
      case CollKind::kAllGather:
        if (a.in_place) {
          check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a.recv, static_cast<int>(a.send_count), type, comm),
                "MPI_Allgather");
        } else {
          check(MPI_Allgather(a.send, static_cast<int>(a.send_count), type, a.recv, static_cast<int>(a.send_count),
                              type, comm),
                "MPI_Allgather");
        }
        return;
      case CollKind::kBroadcast:
        // MPI_Bcast has one buffer: out of place, the root copies its input
        // there first, inside the timing.
        if (!a.in_place && a.rank == a.root) std::memcpy(a.recv, a.send, a.count * type_size(a.type));
        check(MPI_Bcast(a.recv, count, type, a.root, comm), "MPI_Bcast");
        return;
      case CollKind::kReduce: {
        const void* send = a.in_place && a.rank == a.root ? MPI_IN_PLACE : a.send;
        check(MPI_Reduce(send, a.recv, count, type, to_mpi(a.op), a.root, comm), "MPI_Reduce");
        return;
      }
      case CollKind::kAllToAll: {
        const int block = static_cast<int>(a.count / static_cast<std::size_t>(a.nranks));
        check(MPI_Alltoall(a.send, block, type, a.recv, block, type, comm), "MPI_Alltoall");
        return;
      }
      case CollKind::kSendRecv: {
        const int right = (a.rank + 1) % a.nranks;
        const int left = (a.rank + a.nranks - 1) % a.nranks;
        check(MPI_Sendrecv(a.send, count, type, right, 0, a.recv, count, type, left, 0, comm, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
        return;
      }
    }
    throw BackendError(std::string("mpi backend: no call for ") + a.coll->name);
  }

 private:
  MpiLibrary* library_;
  size_t index_;
  Forced forced_;
};

std::unique_ptr<Backend> MpiLibrary::make_backend(const std::string& variant) {
  for (size_t i = 0; i < kNumForced; ++i) {
    if (variant == kForced[i].variant) return std::make_unique<MpiBackend>(this, i);
  }
  throw BackendError("mpi has no backend variant '" + variant + "'");
}

}  // namespace

std::unique_ptr<Library> make_mpi_library() { return std::make_unique<MpiLibrary>(); }

}  // namespace rrbench
