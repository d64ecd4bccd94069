#include "transport/ucx/shm_sweep.hpp"

#include <dirent.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "common/log.hpp"
#include "common/process.hpp"

namespace rr::transport {

namespace {

constexpr const char* kDir = "/dev/shm";
constexpr const char* kPrefix = "ucx_shm_posix_";

using FileId = std::pair<dev_t, ino_t>;

bool all_digits(const char* s) {
  for (; *s; ++s) {
    if (!std::isdigit(static_cast<unsigned char>(*s))) return false;
  }
  return true;
}

// The segments under kDir owned by us: name -> (device, inode).
std::set<std::pair<std::string, FileId>> candidates() {
  std::set<std::pair<std::string, FileId>> out;
  DIR* dir = opendir(kDir);
  if (!dir) return out;
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, kPrefix, std::strlen(kPrefix)) != 0) continue;
    struct stat st {};
    const std::string path = std::string(kDir) + "/" + e->d_name;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    out.insert({e->d_name, {st.st_dev, st.st_ino}});
  }
  closedir(dir);
  return out;
}

// Adds the files process `pid` has open or mapped; false if its open files
// could not be read (and the process is ours).
bool held_by(const char* pid, std::set<FileId>* held) {
  const std::string base = std::string("/proc/") + pid;
  struct stat owner {};
  if (stat(base.c_str(), &owner) != 0) return true;  // gone meanwhile
  const bool ours = owner.st_uid == geteuid();
  DIR* fds = opendir((base + "/fd").c_str());
  if (!fds) return !ours;
  while (dirent* e = readdir(fds)) {
    if (e->d_name[0] == '.') continue;
    struct stat st {};
    if (stat((base + "/fd/" + e->d_name).c_str(), &st) == 0) held->insert({st.st_dev, st.st_ino});
  }
  closedir(fds);
  // Mapped after close: "address perms offset dev inode path" per line.
  // A sandbox may refuse a process's maps even to root (its init): its open
  // files, read above, still count. A segment's creator holds it open for
  // as long as it has a name (UCX unlinks it once peers may attach through
  // /proc/<pid>/fd), so the open files are what decides.
  std::ifstream maps(base + "/maps");
  if (!maps) return true;
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(kPrefix) == std::string::npos) continue;
    const std::string path = line.substr(line.find('/'));
    const std::string name = path.substr(0, path.find(" (deleted)"));
    struct stat st {};
    if (stat(name.c_str(), &st) == 0) held->insert({st.st_dev, st.st_ino});
  }
  return true;
}

// System V segments (UCX's sysv transport: IPC_PRIVATE, marked for removal
// once attached): one of this user's that nobody has attached and whose
// creator has ended was left by a process killed in between.
int remove_orphan_sysv_segments() {
  shm_info info {};
  const int highest = shmctl(0, SHM_INFO, reinterpret_cast<shmid_ds*>(&info));
  int removed = 0;
  for (int index = 0; index <= highest; ++index) {
    shmid_ds ds {};
    const int id = shmctl(index, SHM_STAT, &ds);
    if (id < 0 || ds.shm_perm.uid != geteuid() || ds.shm_perm.__key != IPC_PRIVATE || ds.shm_nattch != 0) continue;
    if ((ds.shm_perm.mode & SHM_DEST) || !process_ended(ds.shm_cpid)) continue;
    if (shmctl(id, IPC_RMID, nullptr) == 0) {
      ++removed;
      RR_LOG(LogLevel::kInfo, "removed System V segment %d, left by process %d, which died", id,
             static_cast<int>(ds.shm_cpid));
    }
  }
  return removed;
}

int remove_orphan_files() {
  const auto found = candidates();
  if (found.empty()) return 0;
  std::set<FileId> held;
  DIR* proc = opendir("/proc");
  if (!proc) return 0;
  bool complete = true;
  while (dirent* e = readdir(proc)) {
    if (all_digits(e->d_name) && !held_by(e->d_name, &held)) complete = false;
  }
  closedir(proc);
  if (!complete) return 0;
  int removed = 0;
  for (const auto& [name, id] : found) {
    if (held.count(id)) continue;
    const std::string path = std::string(kDir) + "/" + name;
    struct stat st {};
    // Still the same file (not replaced since it was listed).
    if (lstat(path.c_str(), &st) != 0 || st.st_dev != id.first || st.st_ino != id.second) continue;
    if (unlink(path.c_str()) == 0) {
      ++removed;
      RR_LOG(LogLevel::kInfo, "removed %s, a UCX segment left by a process that died", path.c_str());
    }
  }
  return removed;
}

}  // namespace

int remove_orphan_ucx_segments() { return remove_orphan_files() + remove_orphan_sysv_segments(); }

}  // namespace rr::transport
