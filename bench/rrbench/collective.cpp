#include "collective.h"

namespace rrbench {

const std::vector<const Collective*>& all_collectives() {
  static const std::vector<const Collective*> collectives = {&kAllReduce};
  return collectives;
}

const Collective* find_collective(const std::string& name) {
  for (const Collective* coll : all_collectives()) {
    if (name == coll->name) return coll;
  }
  return nullptr;
}

}  // namespace rrbench
