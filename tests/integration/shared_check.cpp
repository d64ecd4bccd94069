#include "shared_check.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shared_check {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x3130'6b65'6863'7272ull;  // "rrchek01", little-endian
// Below this many reference evaluations (count x ranks) every rank checks
// the whole result: two file writes and N - 1 reads cost more.
constexpr size_t kMinSharedEvaluations = size_t{1} << 16;
// How long a rank waits for another's record before checking that slice
// itself (and, from then on, every slice: it stops waiting). The ranks leave
// the same collective within milliseconds and check slices of one size; a
// rank that failed before its check (an ASSERT) never writes the record.
constexpr auto kRecordWait = std::chrono::seconds(10);
constexpr auto kEndWait = std::chrono::seconds(30);

// The record's fields, in 64-bit words; the slices' hashes follow.
enum Field { kFieldMagic, kFieldSeq, kFieldRank, kFieldSize, kFieldCount, kFieldElem, kFieldWhat, kFieldOk, kHeader };

struct State {
  bool enabled = false;
  bool waiting = true;
  int rank = 0;
  int size = 1;
  std::string dir;
  uint64_t seq = 0;
};
State g;

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hash_text(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return mix(h);
}

uint64_t hash_bytes(const unsigned char* p, size_t n) {
  uint64_t h = mix(n + 0x9E3779B97F4A7C15ull);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ mix(w)) * 0x9E3779B97F4A7C15ull;
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, p + i, n - i);
    h = (h ^ mix(w ^ (uint64_t{n - i} << 56))) * 0x9E3779B97F4A7C15ull;
  }
  return mix(h);
}

std::string path(const std::string& name) { return g.dir + "/" + name; }
std::string record_name(uint64_t seq, int rank) { return std::to_string(seq) + "." + std::to_string(rank); }

// Whole or not at all: written beside, then renamed into place.
void write_file(const std::string& name, const void* data, size_t bytes) {
  const std::string tmp = path(name + ".tmp"), final_path = path(name);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;  // the others check this rank's slice themselves
  const bool whole = ::write(fd, data, bytes) == static_cast<ssize_t>(bytes);
  ::close(fd);
  if (!whole || ::rename(tmp.c_str(), final_path.c_str()) != 0) ::unlink(tmp.c_str());
}

bool wait_for(const std::string& name, Clock::time_point deadline) {
  auto pause = std::chrono::microseconds(100);
  while (::access(path(name).c_str(), F_OK) != 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
  return true;
}

// Rank `rank`'s record of check `seq`, or an empty vector once the deadline
// passed without one (or it cannot be read whole).
std::vector<uint64_t> read_record(uint64_t seq, int rank, Clock::time_point deadline) {
  const std::string name = record_name(seq, rank);
  if (!wait_for(name, deadline)) return {};
  std::vector<uint64_t> record(kHeader + static_cast<size_t>(g.size));
  const int fd = ::open(path(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t want = static_cast<ssize_t>(record.size() * sizeof(uint64_t));
  const bool whole = ::read(fd, record.data(), static_cast<size_t>(want)) == want;
  ::close(fd);
  return whole ? record : std::vector<uint64_t>{};
}

// Folders of jobs killed before their end() (rr-run stops every rank once
// one fails): removed by a later job once an hour passed without a record
// written there (a folder takes one each check, and no job runs an hour).
void sweep_abandoned(const std::string& tmp) {
  DIR* dir = ::opendir(tmp.c_str());
  if (dir == nullptr) return;
  const time_t stale = ::time(nullptr) - 3600;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, "rr-check-", 9) != 0) continue;
    const std::string folder = tmp + "/" + e->d_name;
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
        st.st_mtime > stale) {
      continue;
    }
    if (DIR* inner = ::opendir(folder.c_str())) {
      while (const dirent* f = ::readdir(inner)) {
        if (f->d_name[0] != '.') ::unlink((folder + "/" + f->d_name).c_str());
      }
      ::closedir(inner);
    }
    ::rmdir(folder.c_str());
  }
  ::closedir(dir);
}

size_t slice_start(size_t count, int s) { return count * static_cast<size_t>(s) / static_cast<size_t>(g.size); }

}  // namespace

void begin(int rank, int size) {
  g = State{};
  g.rank = rank;
  g.size = size;
  const char* token = std::getenv("RR_AUTH_TOKEN");
  const char* port = std::getenv("MASTER_PORT");
  if (size <= 1 || token == nullptr || *token == '\0' || port == nullptr) return;
  const char* tmp_env = std::getenv("TMPDIR");
  const std::string tmp = tmp_env != nullptr && *tmp_env != '\0' ? tmp_env : "/tmp";
  if (rank == 0) sweep_abandoned(tmp);
  char name[40];
  // The token is the job's secret: the folder is named by a hash of it.
  std::snprintf(name, sizeof name, "/rr-check-%016llx",
                static_cast<unsigned long long>(hash_text(std::string(token) + ":" + port)));
  g.dir = tmp + name;
  struct stat st {};
  if (::mkdir(g.dir.c_str(), 0700) != 0 &&
      (::lstat(g.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())) {
    return;  // no folder of our own: every rank checks everything
  }
  g.enabled = true;
}

void check_replicated(const void* out, size_t count, size_t elem, const std::string& what,
                      const std::function<bool(size_t first, size_t n)>& check) {
  if (!g.enabled || count < static_cast<size_t>(g.size) ||
      count * static_cast<size_t>(g.size) < kMinSharedEvaluations) {
    check(0, count);
    return;
  }
  const uint64_t seq = ++g.seq;
  const auto* bytes = static_cast<const unsigned char*>(out);
  const size_t mine = slice_start(count, g.rank), mine_end = slice_start(count, g.rank + 1);
  const bool mine_ok = check(mine, mine_end - mine);

  std::vector<uint64_t> record(kHeader + static_cast<size_t>(g.size));
  record[kFieldMagic] = kMagic;
  record[kFieldSeq] = seq;
  record[kFieldRank] = static_cast<uint64_t>(g.rank);
  record[kFieldSize] = static_cast<uint64_t>(g.size);
  record[kFieldCount] = count;
  record[kFieldElem] = elem;
  record[kFieldWhat] = hash_text(what);
  record[kFieldOk] = mine_ok ? 1 : 0;
  for (int s = 0; s < g.size; ++s) {
    const size_t first = slice_start(count, s), end = slice_start(count, s + 1);
    record[kHeader + static_cast<size_t>(s)] = hash_bytes(bytes + first * elem, (end - first) * elem);
  }
  write_file(record_name(seq, g.rank), record.data(), record.size() * sizeof(uint64_t));
  // Every rank has read check seq - 2's records: it wrote seq - 1's after
  // (known only while this rank waits for them; else end() removes it).
  if (seq > 2 && g.waiting) ::unlink(path(record_name(seq - 2, g.rank)).c_str());

  const auto deadline = Clock::now() + kRecordWait;
  for (int s = 0; s < g.size; ++s) {
    if (s == g.rank) continue;
    bool vouched = false;
    if (g.waiting) {
      const std::vector<uint64_t> theirs = read_record(seq, s, deadline);
      if (theirs.empty()) {
        g.waiting = false;
        std::fprintf(stderr, "shared_check: rank %d has no record of rank %d for check %llu (%s); it checks "
                     "every slice itself from now on\n", g.rank, s, static_cast<unsigned long long>(seq), what.c_str());
      } else {
        vouched = theirs[kFieldMagic] == kMagic && theirs[kFieldSeq] == seq &&
                  theirs[kFieldRank] == static_cast<uint64_t>(s) && theirs[kFieldSize] == record[kFieldSize] &&
                  theirs[kFieldCount] == count && theirs[kFieldElem] == elem &&
                  theirs[kFieldWhat] == record[kFieldWhat] && theirs[kFieldOk] == 1 &&
                  theirs[kHeader + static_cast<size_t>(s)] == record[kHeader + static_cast<size_t>(s)];
      }
    }
    if (!vouched) {
      const size_t first = slice_start(count, s);
      check(first, slice_start(count, s + 1) - first);
    }
  }
}

void end() {
  if (!g.enabled) return;
  // Once every rank is done, no record is read again.
  const std::string done = "done." + std::to_string(g.rank), gone = "gone." + std::to_string(g.rank);
  write_file(done, "", 0);
  const auto deadline = Clock::now() + kEndWait;
  bool all_done = true;
  for (int s = 0; s < g.size && all_done; ++s) all_done = wait_for("done." + std::to_string(s), deadline);
  // Every record of this rank's, also after a wait that ran out (a rank
  // still reading one then checks that slice itself).
  for (uint64_t seq = 1; seq <= g.seq; ++seq) ::unlink(path(record_name(seq, g.rank)).c_str());
  write_file(gone, "", 0);
  // Rank 0 removes the markers and the folder once every rank has seen
  // every marker of "done" (no one waits on them any more).
  if (g.rank == 0) {
    bool all_gone = all_done;
    for (int s = 0; s < g.size && all_gone; ++s) all_gone = wait_for("gone." + std::to_string(s), deadline);
    if (all_gone) {
      for (int s = 0; s < g.size; ++s) {
        ::unlink(path("done." + std::to_string(s)).c_str());
        ::unlink(path("gone." + std::to_string(s)).c_str());
      }
      ::rmdir(g.dir.c_str());
    }
  }
  g.enabled = false;
}

}  // namespace shared_check
