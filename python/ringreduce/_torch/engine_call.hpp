#pragma once
// Where an operation's engine call goes: queued (the engine's ...Async form,
// which writes a request; CPU tensors) or ordered on a CUDA stream (the
// blocking form with that stream; CUDA tensors). Every collective writes its
// call once, for both, with the engine's Config forms:
//   [&](const EngineCall& c) {
//     return c.call(rrAllReduceConfig, rrAllReduceAsyncConfig, buf, buf, count, dtype, op);
//   }
// both forms taking the same arguments, then the communicator, then the
// stream or the request, then the call's config (its own timeout: torch's
// opts.timeout, so no other thread's timeout is ever the call's).

#include <ringreduce/ringreduce.h>

namespace ringreduce_torch {

struct EngineCall {
  rrComm_t comm;
  const rrCollConfig_t* config;
  rrRequest_t* request = nullptr;  // queued: the Async form writes it
  void* stream = nullptr;          // ordered: the stream (nullptr: the fake device path's blocking host call)
  bool ordered = false;

  static EngineCall queued(rrComm_t comm, const rrCollConfig_t* config, rrRequest_t* request) {
    return EngineCall{comm, config, request, nullptr, false};
  }
  static EngineCall on_stream(rrComm_t comm, const rrCollConfig_t* config, void* stream) {
    return EngineCall{comm, config, nullptr, stream, true};
  }

  template <typename Blocking, typename Async, typename... Args>
  rrResult_t call(Blocking blocking_form, Async async_form, Args... args) const {
    return ordered ? blocking_form(args..., comm, stream, config) : async_form(args..., comm, request, config);
  }
};

}  // namespace ringreduce_torch
