// The libraries rr-bench measures, behind two small interfaces:
//   Library  one initialized instance of a library (a ringreduce communicator,
//            MPI_COMM_WORLD, a Gloo context). It also offers the control plane
//            rr-bench itself needs (barrier, max of the ranks' times, sum of
//            their wrong counts); the first library of a run serves it.
//   Backend  one way of running collectives on a Library, a row label in the
//            table: "mpi-default" and "mpi-ring" share one MPI library.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective.h"
#include "dtype.h"

namespace rrbench {

// A library call failed; what() says which call, on which rank, and why.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CallArgs {
  const Collective* coll;
  const void* send;  // in place: inside the same buffer as recv (Collective's offsets)
  void* recv;
  std::size_t count;       // the row's count column
  std::size_t send_count;  // elements this rank sends (count / N for allgather)
  std::size_t recv_count;  // elements this rank receives (count / N for reduce-scatter)
  DataType type;
  RedOp op;
  int root;
  int rank;
  int nranks;
  bool in_place;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // One line: the algorithm and settings this row label stands for.
  virtual std::string settings() const = 0;
  // The schedule the library takes for `count` elements of `type` of `coll`
  // on this run's ranks, for the row's label; empty when it cannot tell.
  virtual std::string algorithm(const Collective& coll, std::size_t count, DataType type) const {
    (void)coll;
    (void)count;
    (void)type;
    return {};
  }
  // Empty when this backend runs `coll` on (type, op); otherwise why it cannot.
  virtual std::string unsupported(const Collective& coll, DataType type, RedOp op) const = 0;
  // False when the backend's in-place form of `coll` lays out its buffers
  // differently from NCCL's (MPI's reduce-scatter): those columns read N/A.
  virtual bool runs_in_place(const Collective& coll) const {
    (void)coll;
    return true;
  }
  // Called on every rank, in the same order, before the calls of one row on
  // these buffers: Gloo builds its algorithm objects, which pair buffers with
  // the peers, here.
  virtual void prepare(const CallArgs& args) { (void)args; }
  // One collective call. A backend whose calls are asynchronous (NCCL's,
  // enqueued on a stream) completes them in wait().
  virtual void run(const CallArgs& args) = 0;
  // Returns when every call run() started has completed; part of the timing.
  virtual void wait() {}
  // After run() and wait(): makes args.recv hold the result, for the check
  // (a backend whose buffers live elsewhere copies it back here).
  virtual void fetch_result(const CallArgs& args) { (void)args; }
  // Releases what prepare() made for this row.
  virtual void finish_row() {}
};

class Library {
 public:
  virtual ~Library() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // Version and library-wide settings, for the header.
  virtual std::string description() const = 0;
  // The backend variant called `variant` (one of variants()).
  virtual std::unique_ptr<Backend> make_backend(const std::string& variant) = 0;

  // Control plane.
  virtual void barrier() = 0;
  // values[i] = max (or sum) over ranks of values[i], on every rank.
  virtual void allreduce_max(double* values, std::size_t n) = 0;
  virtual void allreduce_sum(double* values, std::size_t n) = 0;
  // Rank 0's `bytes` to every rank, over allreduce_sum (rare and small: a
  // library's bootstrap id).
  void broadcast_from_zero(void* bytes, std::size_t n);
};

// Factories, one per library; each is compiled only when its peer was found
// at configure time. They throw BackendError when initialization fails.
std::unique_ptr<Library> make_ringreduce_library(int timeout_s);
#ifdef RR_BENCH_HAVE_MPI
std::unique_ptr<Library> make_mpi_library();
#endif
#ifdef RR_BENCH_HAVE_GLOO
std::unique_ptr<Library> make_gloo_library(const std::string& store_dir, int timeout_s);
#endif
#ifdef RR_BENCH_HAVE_NCCL
// Empty when this rank can run NCCL, with *device set to its GPU; otherwise
// why not (no GPU, or fewer GPUs than ranks on this host). Calls no NCCL.
std::string nccl_unavailable(int rank, int nranks, int* device);
// NCCL on `device`, its unique id carried by `control` (rank 0 makes it).
std::unique_ptr<Library> make_nccl_library(Library* control, int device, bool blocking);
#endif

}  // namespace rrbench
