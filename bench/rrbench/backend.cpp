// What every Library offers on top of its own control plane.

#include "backend.h"

#include <vector>

namespace rrbench {

void Library::broadcast_from_zero(void* bytes, std::size_t n) {
  // Each byte as a double: rank 0's value plus every other rank's zero is
  // exact, whatever the control library reduces with.
  auto* data = static_cast<unsigned char*>(bytes);
  std::vector<double> values(n, 0.0);
  if (rank() == 0) {
    for (std::size_t i = 0; i < n; ++i) values[i] = data[i];
  }
  allreduce_sum(values.data(), n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<unsigned char>(values[i]);
}

}  // namespace rrbench
