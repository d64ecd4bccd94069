// The filter on UCX's log (lib/transport/ucx/ucx_log.hpp): the lines a lost
// peer explains are kept off the output only while a loss has been seen,
// and nothing else ever is.

#include "transport/ucx/ucx_log.hpp"

#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// What UCX printed (to stdout, its default log file, or stderr) while `emit` ran.
template <typename Emit>
std::string printed(Emit emit) {
  std::fflush(stdout);
  std::fflush(stderr);
  char path[] = "/tmp/rr-ucx-log-XXXXXX";
  const int file = mkstemp(path);
  const int out = dup(1), err = dup(2);
  dup2(file, 1);
  dup2(file, 2);
  emit();
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(out, 1);
  dup2(err, 2);
  close(out);
  close(err);
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  lseek(file, 0, SEEK_SET);
  while ((n = read(file, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(file);
  unlink(path);
  return text;
}

void log_line(const char* file, ucs_log_level_t level, const char* text) {
  ucs_log_dispatch(file, 57, "test", level, &ucs_global_opts.log_component, "%s", text);
}

// As UCX's mm_sysv.c writes it when the peer's segment is gone.
void shmat_failed() {
  ucs_log_dispatch("sm/mm/sysv/mm_sysv.c", 57, "uct_sysv_mem_attach", UCS_LOG_LEVEL_ERROR,
                   &ucs_global_opts.log_component, "shmat(shmid=%d) failed: %s", 42, "Invalid argument");
}

TEST(UcxLog, ExpectedLinesAreKeptOffOnlyAfterALoss) {
  rr::transport::ucx_log::install();
  rr::transport::ucx_log::install();  // idempotent
  EXPECT_NE(printed(shmat_failed).find("shmat(shmid=42) failed"), std::string::npos)
      << "no loss seen: UCX's line is printed";
  rr::transport::ucx_log::count_loss(+1);
  EXPECT_EQ(printed(shmat_failed), "") << "after a loss: kept off the output";
  EXPECT_EQ(printed([] {
              ucs_log_dispatch("ucp/tag/tag_match.c", 62, "f", UCS_LOG_LEVEL_WARN, &ucs_global_opts.log_component,
                               "unexpected tag-receive descriptor %p was not matched", static_cast<void*>(nullptr));
            }),
            "");
  // Never an unexpected line: another message of the same file, the same
  // message from another file.
  EXPECT_NE(printed([] { log_line("sm/mm/sysv/mm_sysv.c", UCS_LOG_LEVEL_ERROR, "shmget failed: No space left"); })
                .find("shmget failed"),
            std::string::npos);
  EXPECT_NE(printed([] { log_line("uct/tcp/tcp_ep.c", UCS_LOG_LEVEL_ERROR, "shmat(shmid=1) failed"); }).find("shmat"),
            std::string::npos);
  rr::transport::ucx_log::count_loss(-1);
  EXPECT_NE(printed(shmat_failed).find("shmat(shmid=42) failed"), std::string::npos) << "the loss has closed";
}

}  // namespace
