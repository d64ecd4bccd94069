#include "common/process.hpp"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rr {

bool process_ended(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;  // EPERM: it runs, as another user
  // It exists, perhaps only as a zombie: its state follows the command
  // name's closing parenthesis (the name may hold spaces and parentheses).
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char stat[512] = {};
  const size_t n = std::fread(stat, 1, sizeof(stat) - 1, f);
  std::fclose(f);
  const char* close_paren = std::strrchr(stat, ')');
  return n > 0 && close_paren && close_paren + 2 < stat + n && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

}  // namespace rr
