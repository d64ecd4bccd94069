// The one-shot schedules' shared-memory board (transport/shm/board.hpp)
// between real processes: rank 0 makes it, forked ranks attach by pid and
// descriptor, and every rank reads every peer's publication whole, with its
// length and header, through many turns of the two alternating buffers and
// across futex sleeps and skew; announcements (kNoData); shapes and
// segments refused; nothing left in /dev/shm.

#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "transport/shm/board.hpp"

using rr::transport::shm::Board;

namespace {

constexpr int kRanks = 3;
constexpr size_t kCapacity = 256;
constexpr uint64_t kPublications = 20000;
// A wait longer than this is a lost publication (a test that fails, not one that hangs).
constexpr auto kPatience = std::chrono::seconds(5);

// Publication n of rank r: its length, header and bytes, a function of (r, n) only.
uint32_t length_of(int r, uint64_t n) {
  return 1 + static_cast<uint32_t>((static_cast<uint32_t>(n) * 2654435761u + static_cast<uint32_t>(r) * 97) % kCapacity);
}
uint8_t byte_of(int r, uint64_t n, size_t k) { return static_cast<uint8_t>(n * 31 + k * 7 + r * 13 + 1); }

struct Header {
  uint64_t rank;
  uint64_t number;
  uint64_t length;
  uint64_t check;  // a function of the three, so a torn header shows
};
static_assert(sizeof(Header) == Board::kHeaderRoom, "the header fills the room");
uint64_t check_of(uint64_t r, uint64_t n, uint64_t len) { return (r * 0x9e3779b97f4a7c15ull) ^ (n * 31 + len) ^ 0x5a5a; }

void write_publication(Board* board, int me, uint64_t n) {
  uint8_t* room = board->buffer(me, n);
  const uint32_t len = length_of(me, n);
  const Header h{static_cast<uint64_t>(me), n, len, check_of(me, n, len)};
  std::memcpy(room, &h, sizeof(h));
  uint8_t* data = room + Board::kHeaderRoom;
  for (size_t k = 0; k < len; ++k) data[k] = byte_of(me, n, k);
  board->publish(me, n, len);
}

// Whether peer's publication n, once published, has its length, header and every byte.
bool publication_matches(Board* board, int peer, uint64_t n, uint32_t bytes) {
  const uint32_t len = length_of(peer, n);
  if (bytes != len) return false;
  const uint8_t* room = board->buffer(peer, n);
  Header h{};
  std::memcpy(&h, room, sizeof(h));
  if (h.rank != static_cast<uint64_t>(peer) || h.number != n || h.length != len || h.check != check_of(peer, n, len)) {
    return false;
  }
  const uint8_t* data = room + Board::kHeaderRoom;
  bool ok = true;
  for (size_t k = 0; k < len; ++k) ok &= data[k] == byte_of(peer, n, k);
  return ok;
}

// Waits for peer's publication n (spinning, yielding, and on some numbers
// sleeping on the futex); false: not there within kPatience.
bool wait_published(Board* board, int peer, uint64_t n, uint32_t* bytes) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  uint32_t spins = 0;
  while (!board->published(peer, n, bytes)) {
    if (n % 7 == 0) {
      board->sleep_until_published(peer, n, 50);
    } else if (++spins % 256 == 0) {
      std::this_thread::yield();  // 2 cores, 3 ranks: let the writer run
    }
    if ((spins & 1023) == 0 && std::chrono::steady_clock::now() > deadline) return false;
    if (n % 7 == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

// One rank's whole run: publish 0, 1, 2, ... and read every peer's each.
// Returns how many publications were wrong (or lost: then it stops).
uint64_t run_rank(Board* board, int me) {
  uint64_t wrong = 0;
  for (uint64_t n = 0; n < kPublications; ++n) {
    // The rule of the two buffers: write n only once every peer published n - 1.
    if (n > 0) {
      for (int peer = 0; peer < kRanks; ++peer) {
        uint32_t bytes = 0;
        if (peer != me && !wait_published(board, peer, n - 1, &bytes)) return wrong + 1;
      }
    }
    if (n % 1000 == static_cast<uint64_t>(me)) usleep(2000);  // skew: the others sleep on the futex
    write_publication(board, me, n);
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer == me) continue;
      uint32_t bytes = 0;
      if (!wait_published(board, peer, n, &bytes)) return wrong + 1;
      wrong += !publication_matches(board, peer, n, bytes);
    }
  }
  return wrong;
}

// A forked rank: attaches to the parent's board and runs. Exit 0: all matched.
int child_rank(int pid, int fd, int me) {
  std::unique_ptr<Board> board;
  if (!Board::attach(pid, fd, kRanks, kCapacity, &board).ok()) return 2;
  const uint64_t wrong = run_rank(board.get(), me);
  if (wrong != 0) return 1;
  return board->publications(me) == kPublications ? 0 : 3;
}

// The board's entries in /dev/shm (there should never be any: it is a memfd).
std::set<std::string> shm_entries() {
  std::set<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, "ringreduce", 10) == 0) names.insert(e->d_name);
  }
  closedir(dir);
  return names;
}

TEST(Board, EveryRankReadsEveryPublicationBetweenProcesses) {
  const std::set<std::string> before = shm_entries();
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Board> board;
  rr::Status made = Board::create(kRanks, kCapacity, &board);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(board->ranks(), kRanks);
  EXPECT_EQ(board->capacity(), kCapacity);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(board->publications(r), 0u) << "a new board has no publication";
  const int parent = static_cast<int>(getpid());
  pid_t children[kRanks] = {};
  for (int r = 1; r < kRanks; ++r) {
    children[r] = fork();
    ASSERT_GE(children[r], 0);
    if (children[r] == 0) _exit(child_rank(parent, board->fd(), r));
  }

  const uint64_t wrong = run_rank(board.get(), 0);
  for (int r = 1; r < kRanks; ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(children[r], &status, 0), children[r]);
    ASSERT_TRUE(WIFEXITED(status)) << "rank " << r;
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "rank " << r << " could not attach (2), read a wrong or lost publication (1) or miscounted its own (3)";
  }
  EXPECT_EQ(wrong, 0u) << "rank 0 read wrong or lost publications";
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(board->publications(r), kPublications) << "rank " << r;
  board.reset();
  EXPECT_EQ(shm_entries(), before) << "the board left something in /dev/shm";
  std::printf("[          ] %d ranks x %llu publications in %.2f s\n", kRanks,
              static_cast<unsigned long long>(kPublications),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

TEST(Board, AnnouncementsCarryTheHeaderAndNoData) {
  std::unique_ptr<Board> board;
  ASSERT_TRUE(Board::create(2, 64, &board).ok());
  const int parent = static_cast<int>(getpid());
  const int fd = board->fd();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rank 1: publishes 0 with 5 bytes, reads the parent's announcement 0,
    // then announces 1. Exit 0: the parent's 0 was an announcement with its header.
    std::unique_ptr<Board> mine;
    if (!Board::attach(parent, fd, 2, 64, &mine).ok()) _exit(2);
    uint8_t* room = mine->buffer(1, 0);
    std::memcpy(room, "one:0", 5);
    std::memcpy(room + Board::kHeaderRoom, "hello", 5);
    mine->publish(1, 0, 5);
    uint32_t bytes = 0;
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (!mine->published(0, 0, &bytes)) {
      mine->sleep_until_published(0, 0, 50);
      if (std::chrono::steady_clock::now() > deadline) _exit(4);
    }
    if (bytes != Board::kNoData) _exit(5);
    if (std::memcmp(mine->buffer(0, 0), "zero:0", 6) != 0) _exit(6);
    std::memcpy(mine->buffer(1, 1), "one:1", 5);
    mine->publish(1, 1, Board::kNoData);
    _exit(mine->publications(1) == 2 ? 0 : 7);
  }

  std::memcpy(board->buffer(0, 0), "zero:0", 6);
  board->publish(0, 0, Board::kNoData);
  uint32_t bytes = 0;
  for (uint64_t n = 0; n < 2; ++n) {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    bool there = true;
    while (!board->published(1, n, &bytes)) {
      board->sleep_until_published(1, n, 50);
      if (std::chrono::steady_clock::now() > deadline) {
        there = false;
        break;
      }
    }
    ASSERT_TRUE(there) << "rank 1's publication " << n << " never came";
    if (n == 0) {
      EXPECT_EQ(bytes, 5u);
      EXPECT_EQ(std::memcmp(board->buffer(1, 0), "one:0", 5), 0);
      EXPECT_EQ(std::memcmp(board->buffer(1, 0) + Board::kHeaderRoom, "hello", 5), 0);
    } else {
      EXPECT_EQ(bytes, Board::kNoData) << "an announcement reads as kNoData";
      EXPECT_EQ(std::memcmp(board->buffer(1, 1), "one:1", 5), 0) << "an announcement carries its header";
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "rank 1: could not attach (2), lost (4), saw data (5) or a wrong header (6), miscounted (7)";
  EXPECT_EQ(board->publications(0), 1u);
  EXPECT_EQ(board->publications(1), 2u) << "a publication and an announcement both count";
  EXPECT_FALSE(board->published(0, 1, &bytes)) << "rank 0 made no publication 1";
}

TEST(Board, RefusesBadShapesAndForeignSegments) {
  std::unique_ptr<Board> board;
  EXPECT_EQ(Board::create(kRanks, 0, &board).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(Board::create(kRanks, 100, &board).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(Board::create(0, kCapacity, &board).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(Board::create(-1, kCapacity, &board).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(Board::create(kRanks, size_t{32} << 20, &board).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(board, nullptr) << "a refused shape makes nothing";
  ASSERT_TRUE(Board::create(kRanks, kCapacity, &board).ok());
  const int self = static_cast<int>(getpid());

  // Bad pid or descriptor: refused before any system call, or by it.
  std::unique_ptr<Board> other;
  EXPECT_EQ(Board::attach(0, board->fd(), kRanks, kCapacity, &other).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(Board::attach(-5, board->fd(), kRanks, kCapacity, &other).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(Board::attach(self, -1, kRanks, kCapacity, &other).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(Board::attach(self, board->fd(), kRanks, 100, &other).code(), rr::Code::kInvalidArgument);
  rr::Status wrong = Board::attach(self, 100000, kRanks, kCapacity, &other);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("pidfd_getfd"), std::string::npos) << wrong.message();
  const pid_t gone = fork();  // a process that no longer exists
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  EXPECT_FALSE(Board::attach(static_cast<int>(gone), board->fd(), kRanks, kCapacity, &other).ok());
  EXPECT_EQ(other, nullptr);

  // A segment that is not a board: refused, not mapped as one.
  const int foreign = static_cast<int>(syscall(SYS_memfd_create, "not-a-board", MFD_CLOEXEC));
  ASSERT_GE(foreign, 0);
  ASSERT_EQ(ftruncate(foreign, 1 << 20), 0);
  EXPECT_FALSE(Board::attach(self, foreign, kRanks, kCapacity, &other).ok());
  close(foreign);

  // Another shape than the board has, from another process: refused, while
  // the right shape attaches. Exit bits: 1 right shape refused, 2 more ranks
  // accepted, 4 fewer ranks accepted, 8 another capacity accepted.
  const int fd = board->fd();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int bits = 0;
    std::unique_ptr<Board> b;
    if (!Board::attach(self, fd, kRanks, kCapacity, &b).ok()) bits |= 1;
    b.reset();
    if (Board::attach(self, fd, kRanks + 1, kCapacity, &b).ok()) bits |= 2;
    if (Board::attach(self, fd, kRanks - 1, kCapacity, &b).ok()) bits |= 4;
    rr::Status cap = Board::attach(self, fd, kRanks, kCapacity * 2, &b);
    if (cap.ok()) bits |= 8;
    _exit(bits);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "attaching with a wrong shape crashed";
  EXPECT_EQ(WEXITSTATUS(status), 0);

  // Nothing is left open once the maker closed its descriptor.
  board->close_fd();
  EXPECT_EQ(board->fd(), -1);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

TEST(Board, LeavesNothingInDevShm) {
  const std::set<std::string> before = shm_entries();
  {
    std::unique_ptr<Board> board;
    ASSERT_TRUE(Board::create(kRanks, kCapacity, &board).ok());
    std::unique_ptr<Board> peer;
    ASSERT_TRUE(Board::attach(static_cast<int>(getpid()), board->fd(), kRanks, kCapacity, &peer).ok());
    EXPECT_EQ(peer->fd(), -1) << "an attached rank keeps no descriptor";
    // The same memory through both mappings.
    std::memcpy(peer->buffer(2, 0), "two", 3);
    peer->publish(2, 0, Board::kNoData);
    uint32_t bytes = 0;
    ASSERT_TRUE(board->published(2, 0, &bytes));
    EXPECT_EQ(bytes, Board::kNoData);
    EXPECT_EQ(std::memcmp(board->buffer(2, 0), "two", 3), 0);
    EXPECT_EQ(shm_entries(), before) << "a live board is not in /dev/shm either";
    const int fd = board->fd();
    board.reset();
    EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the maker's descriptor closes with it";
  }
  EXPECT_EQ(shm_entries(), before);
}

}  // namespace
