#pragma once
// The communicator: rank, size, settings, operation sequence numbers, the
// staging pool and the executor. It holds a transport through the interface
// only: how bytes move is not its business.

#include <cstdint>
#include <memory>
#include <string>

#include "algo/ring.hpp"
#include "comm/settings.hpp"
#include "common/status.hpp"
#include "exec/ring_executor.hpp"
#include "memory/staging_pool.hpp"
#include "ringreduce/ringreduce.h"
#include "transport/transport.hpp"

namespace rr {

class Communicator {
 public:
  // `keepalive` holds whatever the transport needs to outlive (the rendezvous).
  Communicator(int rank, int size, Settings settings, std::unique_ptr<transport::Transport> transport,
               std::shared_ptr<void> keepalive = nullptr);
  ~Communicator();

  // Sizes the staging pool and the executor; call once before any collective.
  Status init();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Settings& settings() const { return settings_; }
  transport::Transport& transport() { return *transport_; }
  const memory::StagingPool& pool() const { return pool_; }

  Status allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op);
  // recv (recvcount elements) = op over ranks of send[rank * recvcount ...].
  Status reduce_scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype, rrRedOp_t op);
  // recv[r * sendcount ...] = rank r's send, on every rank.
  Status all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype);

  // The last error's text; rrGetLastError(comm) returns it.
  std::string& last_error() { return last_error_; }

 private:
  Status check_usable() const;
  // Runs the ring over `count` elements of `dtype` with the given phases.
  Status run_ring(const char* name, const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op,
                  int shift, algo::RingPhases phases);

  int rank_;
  int size_;
  Settings settings_;
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<void> keepalive_;
  memory::StagingPool pool_;
  std::unique_ptr<exec::RingExecutor> ring_;
  uint64_t sequence_ = 0;
  Status broken_;  // set once an operation left the transport in an unknown state
  std::string last_error_;
};

}  // namespace rr
