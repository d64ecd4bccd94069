#include "transport/shm/segment.hpp"

#include <linux/futex.h>
#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <string>

namespace rr::transport::shm {

namespace {

Status errno_error(const char* what, const char* call) {
  return InternalError(std::string(what) + ": " + call + ": " + std::strerror(errno));
}

}  // namespace

Status create_segment(const char* what, const char* name, size_t bytes, int* fd) {
  const int made = static_cast<int>(syscall(SYS_memfd_create, name, MFD_CLOEXEC));
  if (made < 0) return errno_error(what, "memfd_create");
  if (ftruncate(made, static_cast<off_t>(bytes)) != 0) {
    const Status failed = InternalError(std::string(what) + " of " + std::to_string(bytes) +
                                        " bytes: ftruncate: " + std::strerror(errno));
    close(made);
    return failed;
  }
  *fd = made;
  return Status::Ok();
}

Status copy_descriptor(const char* what, int pid, int fd, int* local) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return errno_error(what, "pidfd_open");
  const int copied = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
  const int getfd_errno = errno;
  close(pidfd);
  if (copied < 0) {
    errno = getfd_errno;
    return errno_error(what, "pidfd_getfd");
  }
  *local = copied;
  return Status::Ok();
}

Status map_segment(const char* what, int fd, size_t bytes, void** mapping) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno_error(what, "fstat");
  if (static_cast<size_t>(st.st_size) != bytes) {
    return InternalError(std::string(what) + ": segment holds " + std::to_string(st.st_size) + " bytes, expected " +
                         std::to_string(bytes));
  }
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) return errno_error(what, "mmap");
  *mapping = mapped;
  return Status::Ok();
}

Status place_pages(const char* what, void* address, size_t bytes, int node) {
  if (node < 0 || bytes == 0) return Status::Ok();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kMaskBits = 8 * sizeof(unsigned long);
  if (static_cast<size_t>(node) >= 64 * kMaskBits) {
    return InvalidArgument(std::string(what) + ": NUMA node " + std::to_string(node) + " is out of range");
  }
  unsigned long mask[64] = {};
  mask[static_cast<size_t>(node) / kMaskBits] = 1UL << (static_cast<size_t>(node) % kMaskBits);
  const size_t length = (bytes + page - 1) / page * page;
  // maxnode counts bits, and the kernel reads one fewer than it is told.
  if (syscall(SYS_mbind, address, length, MPOL_PREFERRED, mask, 64 * kMaskBits + 1, 0) != 0) {
    if (errno == ENOSYS) return Status::Ok();  // a kernel without NUMA: one node, nothing to place
    return InternalError(std::string(what) + ": placing " + std::to_string(bytes) + " bytes on NUMA node " +
                         std::to_string(node) + ": mbind: " + std::strerror(errno));
  }
  // A fresh segment reads as zeros: writing a zero allocates each page where
  // the policy says, and changes nothing else.
  auto* bytes_at = static_cast<volatile uint8_t*>(address);
  for (size_t offset = 0; offset < bytes; offset += page) bytes_at[offset] = bytes_at[offset];
  return Status::Ok();
}

int node_of_page(const void* address) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0, address, MPOL_F_NODE | MPOL_F_ADDR) != 0) return -1;
  return node;
}

bool preferred_node(const void* address, int* node) {
  int mode = 0;
  constexpr size_t kMaskBits = 8 * sizeof(unsigned long);
  unsigned long mask[64] = {};
  if (syscall(SYS_get_mempolicy, &mode, mask, 64 * kMaskBits, address, MPOL_F_ADDR) != 0) return false;
  if (mode != MPOL_PREFERRED) return false;
  for (size_t bit = 0; bit < 64 * kMaskBits; ++bit) {
    if (mask[bit / kMaskBits] & (1UL << (bit % kMaskBits))) {
      *node = static_cast<int>(bit);
      return true;
    }
  }
  return false;
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, int timeout_ms) {
  timespec limit{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &limit, nullptr, 0);
}

}  // namespace rr::transport::shm
