#pragma once
// Where an operation's engine call goes: queued (the engine's ...Async form,
// which writes a request; CPU tensors) or ordered on a CUDA stream (the
// blocking form with that stream; CUDA tensors). Every collective writes its
// call once, for both:
//   [&](const EngineCall& c) { return c.call(rrAllReduce, rrAllReduceAsync, buf, buf, count, dtype, op); }
// both forms taking the same arguments, then the communicator, then the
// stream or the request.

#include <ringreduce/ringreduce.h>

namespace ringreduce_torch {

struct EngineCall {
  rrComm_t comm;
  rrRequest_t* request = nullptr;  // queued: the Async form writes it
  void* stream = nullptr;          // ordered: the stream (nullptr: the fake device path's blocking host call)
  bool ordered = false;

  static EngineCall queued(rrComm_t comm, rrRequest_t* request) { return EngineCall{comm, request, nullptr, false}; }
  static EngineCall on_stream(rrComm_t comm, void* stream) { return EngineCall{comm, nullptr, stream, true}; }

  template <typename Blocking, typename Async, typename... Args>
  rrResult_t call(Blocking blocking, Async async, Args... args) const {
    return ordered ? blocking(args..., comm, stream) : async(args..., comm, request);
  }
};

}  // namespace ringreduce_torch
