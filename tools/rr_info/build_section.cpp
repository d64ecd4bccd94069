// What was built: ringreduce's version and the optional parts Meson found.

#include <ucp/api/ucp_version.h>

#include <string>

#include "build_features.hpp"
#include "sections.hpp"

namespace rr::info {

namespace {

std::string built(bool yes) { return yes ? "yes" : "no"; }

}  // namespace

Section build_section() {
  Section s;
  s.title = "ringreduce " + std::string(kVersion);
  s.key = "build";
  int code = 0;
  std::string library = "?";
  if (rrGetVersion(&code) == rrSuccess) library = std::to_string(code);
  s.facts = {
      {"version", kVersion},
      {"rrGetVersion", library},
      {"build type", kBuildType},
      {"CUDA", kCuda ? std::string("yes, kernels for ") + kGpuArchs : "no"},
      {"hwloc", built(kHwloc)},
      {"UCX (headers)", std::to_string(UCP_API_MAJOR) + "." + std::to_string(UCP_API_MINOR)},
      {"rr-bench peer: MPI", built(kMpi)},
      {"rr-bench peer: Gloo", built(kGloo)},
      {"rr-bench peer: NCCL", built(kNccl)},
      {"Python package", built(kPythonPackage)},
      {"torch backend", built(kTorchBackend)},
      {"torch backend tensors", kTorchBackend ? kTorchTensors : "none"},
  };
  return s;
}

}  // namespace rr::info
