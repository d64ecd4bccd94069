#include "binding.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>

namespace rr::run {

std::vector<int> allowed_cpus(std::string* error) {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    *error = std::strerror(errno);
    return cpus;
  }
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::vector<int> plan_binding(BindTo how, int nranks, const std::vector<int>& cpus) {
  std::vector<int> plan(static_cast<size_t>(nranks > 0 ? nranks : 0), -1);
  if (how == BindTo::kNone || cpus.empty()) return plan;
  for (size_t rank = 0; rank < plan.size(); ++rank) plan[rank] = cpus[rank % cpus.size()];
  return plan;
}

}  // namespace rr::run
