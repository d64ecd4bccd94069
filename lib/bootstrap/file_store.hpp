#pragma once
// The file store behind `file://` init (torch.distributed's FileStore): ranks
// that share a file system rendezvous through one file.
//
// The file is an append-only log of records, all integers little-endian:
//
//   record := u32 magic "RRKV" | u32 key_length | u32 value_length | key | value
//
// The latest record for a key wins. Appends (set, and add's read-modify-write)
// hold an fcntl write lock on the whole file; scans hold a read lock, so a
// scan never sees half a record from a live writer. A record cut short can
// only come from a writer that died mid-append: it is reported as corruption,
// naming the file and the offset.
//
// Locks are open-file-description locks (F_OFD_SETLKW) where the kernel has
// them (Linux >= 3.15): they exclude each other across processes, and also
// between two FileStores of one process, which classic per-process POSIX locks
// do not. They interoperate with classic locks taken by other programs.
//
// get() re-scans the file every few milliseconds until the key appears; each
// scan reads only the bytes appended since the previous one.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/status.hpp"

namespace rr::bootstrap {

namespace file_store {

constexpr uint32_t kRecordMagic = 0x564B5252;  // "RRKV" in file byte order
constexpr uint32_t kRecordHeaderBytes = 3 * 4;
// Bounds checked when writing and when parsing: a length beyond them means a
// corrupt file, not a huge allocation.
constexpr uint32_t kMaxKeyBytes = 64u << 10;
constexpr uint32_t kMaxValueBytes = 64u << 20;

}  // namespace file_store

class FileStore : public Store {
 public:
  // Opens (creating with mode 0600 if missing) the store file at `path`.
  [[nodiscard]] static Status Open(const std::string& path, std::unique_ptr<FileStore>* out);

  Status set(const std::string& key, const Bytes& value) override;
  Status get(const std::string& key, Clock::time_point deadline, Bytes* value) override;
  // The deadline bounds nothing here: the write lock is held by other ranks
  // only for one append, so waiting for it is short.
  Status add(const std::string& key, int64_t delta, Clock::time_point deadline,
             int64_t* result) override;

  const std::string& path() const { return path_; }

 private:
  FileStore(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

  class RangeLock;  // holds an fcntl lock on the whole file for one scope

  // Parses the records appended since the last scan into values_. Caller holds
  // mutex_ and a read or write lock on the file.
  Status scan_locked();
  // Appends one record at the end of the file. Caller holds mutex_ and the
  // write lock, and has just scanned (so scanned_bytes_ is the end).
  Status append_locked(const std::string& key, const Bytes& value);
  Status check_sizes(const std::string& key, size_t value_size) const;

  const std::string path_;
  std::mutex mutex_;  // fcntl locks do not exclude threads sharing one descriptor
  UniqueFd fd_;
  bool ofd_locks_ = true;        // guarded by mutex_; false after the kernel refused them
  uint64_t scanned_bytes_ = 0;   // guarded by mutex_; file prefix already parsed
  std::unordered_map<std::string, Bytes> values_;  // guarded by mutex_
};

}  // namespace rr::bootstrap
