// torch.ops.ringreduce.all_reduce_(tensor, group_name, op="sum"): an
// in-place all-reduce as an operator of torch's dispatcher, for inference
// code under torch.compile(fullgraph=True), where DeepSpeed users call its
// inference_all_reduce_. The CPU kernel issues the group's all-reduce and
// waits for it without the GIL; the Meta kernel (what fake tensors run while
// torch.compile traces) does nothing, since the op only writes `tensor`.

#include <ATen/core/op_registration/op_registration.h>
#include <Python.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/library.h>

#include <optional>
#include <string>

#include "errors.hpp"
#include "gil.hpp"
#include "process_group.hpp"
#include "tensors.hpp"

namespace ringreduce_torch {

namespace {

void all_reduce_cpu(at::Tensor tensor, std::string group_name, std::string op) {
  c10d::AllreduceOptions opts;
  opts.reduceOp = reduce_op_named("all_reduce_", op);
  opts.asyncOp = false;  // waited for here: the engine runs it on this thread when its communicator is idle
  const c10::intrusive_ptr<c10d::ProcessGroup> group = c10d::resolve_process_group(group_name);
  auto* backend = dynamic_cast<ProcessGroupRingreduce*>(group->getBackend(c10::DeviceType::CPU).get());
  if (backend == nullptr) {
    throw invalid_argument("all_reduce_", "group \"" + group_name + "\" has no ringreduce backend for CPU tensors");
  }
  std::vector<at::Tensor> tensors{tensor};
  std::optional<pybind11::gil_scoped_release> no_gil;
  release_gil_if_held(&no_gil);
  backend->allreduce(tensors, opts)->wait();
}

void all_reduce_meta(at::Tensor, std::string, std::string) {}

}  // namespace

// The registrations record __FILE__, which in Meson's unity build is this
// file's absolute path through the build folder: named here as the source
// tree names it, so that the wheel's build (build-wheel/) compiles the same
// text as build/ does and ccache hands it build/'s object
// (tests/python/meson.build) instead of 20 s of compiling torch's headers.
#line 50 "python/ringreduce/_torch/inference_op.cpp"
TORCH_LIBRARY(ringreduce, m) {
  m.def("all_reduce_(Tensor(a!) tensor, str group_name, str op=\"sum\") -> ()");
}

TORCH_LIBRARY_IMPL(ringreduce, CPU, m) { m.impl("all_reduce_", &all_reduce_cpu); }

TORCH_LIBRARY_IMPL(ringreduce, Meta, m) { m.impl("all_reduce_", &all_reduce_meta); }

}  // namespace ringreduce_torch
