// The filter on UCX's log (lib/transport/ucx/ucx_log.hpp): an attach to a
// segment its peer released, or a refused connection and UCX's advice right
// after it, is kept off the output always, the warnings a
// failure leaves at close only while a loss has been seen, and nothing else
// ever is.

#include "transport/ucx/ucx_log.hpp"

#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <cerrno>
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

// As UCX's mm_sysv.c writes it when the peer's segment is gone (EINVAL)
// or for another reason (EACCES).
void shmat_failed(int error) {
  errno = error;
  ucs_log_dispatch("sm/mm/sysv/mm_sysv.c", 57, "uct_sysv_mem_attach", UCS_LOG_LEVEL_ERROR,
                   &ucs_global_opts.log_component, "shmat(shmid=%d) failed: %m", 42);
}

void mpool_warning() {
  ucs_log_dispatch("ucs/datastruct/mpool.c", 53, "f", UCS_LOG_LEVEL_WARN, &ucs_global_opts.log_component,
                   "object %p was not returned to mpool %s", static_cast<void*>(nullptr), "ucp_requests");
}

TEST(UcxLog, PeerGoneAttachFailuresAreKeptOffAlways) {
  rr::transport::ucx_log::install();
  rr::transport::ucx_log::install();  // idempotent
  EXPECT_EQ(printed([] { shmat_failed(EINVAL); }), "") << "the peer released its segment: kept off";
  const std::string other = printed([] { shmat_failed(EACCES); });
  EXPECT_NE(other.find("shmat(shmid=42) failed: Permission denied"), std::string::npos)
      << "any other reason is printed, with UCX's own %m intact: " << other;
}

// As UCX's sock.c writes it when a connect fails.
void connect_failed(int error) {
  errno = error;
  ucs_log_dispatch("ucs/sys/sock.c", 325, "ucs_socket_connect", UCS_LOG_LEVEL_ERROR, &ucs_global_opts.log_component,
                   "connect(fd=%d, dest_addr=%s) failed: %m", 27, "127.0.0.1:36157");
}

TEST(UcxLog, ARefusedConnectionToAGonePeerIsKeptOff) {
  rr::transport::ucx_log::install();
  EXPECT_EQ(printed([] { connect_failed(ECONNREFUSED); }), "") << "nothing listens: the peer's worker is gone";
  const std::string other = printed([] { connect_failed(ETIMEDOUT); });
  EXPECT_NE(other.find("failed: Connection timed out"), std::string::npos) << "any other reason is printed: " << other;
}

// As UCX's tcp_ep.c writes it when it gives up reconnecting.
void gave_up_reconnecting() {
  ucs_log_dispatch("uct/tcp/tcp_ep.c", 1150, "uct_tcp_ep_create_socket_and_connect", UCS_LOG_LEVEL_ERROR,
                   &ucs_global_opts.log_component,
                   "try to increase \"net.core.somaxconn\", \"net.core.netdev_max_backlog\", "
                   "\"net.ipv4.tcp_max_syn_backlog\" to the maximum value on the remote node or increase %s%s%s (=%u)",
                   "UCX_", "TCP_", "MAX_CONN_RETRIES", 25u);
}

TEST(UcxLog, UcxsAdviceAfterARefusedConnectionIsKeptOffOnlyRightAfterIt) {
  rr::transport::ucx_log::install();
  EXPECT_EQ(printed([] {
              connect_failed(ECONNREFUSED);
              gave_up_reconnecting();
            }),
            "")
      << "UCX gave up on a peer where nothing listens: kept off with the refusal";
  EXPECT_NE(printed(gave_up_reconnecting).find("MAX_CONN_RETRIES (=25)"), std::string::npos)
      << "on its own (a live peer's backlog, say), it is printed";
  const std::string between = printed([] {
    connect_failed(ECONNREFUSED);
    log_line("uct/tcp/tcp_iface.c", UCS_LOG_LEVEL_ERROR, "another line");
    gave_up_reconnecting();
  });
  EXPECT_NE(between.find("MAX_CONN_RETRIES (=25)"), std::string::npos)
      << "with another line between, the refusal no longer explains it: " << between;
  EXPECT_NE(printed([] {
              connect_failed(ETIMEDOUT);
              gave_up_reconnecting();
            }).find("MAX_CONN_RETRIES"),
            std::string::npos)
      << "after a connect that failed otherwise, it is printed";
}

TEST(UcxLog, CloseWarningsAreKeptOffOnlyAfterALoss) {
  rr::transport::ucx_log::install();
  EXPECT_NE(printed(mpool_warning).find("was not returned to mpool"), std::string::npos)
      << "no loss seen: UCX's line is printed";
  rr::transport::ucx_log::count_loss(+1);
  EXPECT_EQ(printed(mpool_warning), "") << "after a loss: kept off the output";
  EXPECT_EQ(printed([] {
              ucs_log_dispatch("ucp/tag/tag_match.c", 62, "f", UCS_LOG_LEVEL_WARN, &ucs_global_opts.log_component,
                               "unexpected tag-receive descriptor %p was not matched", static_cast<void*>(nullptr));
            }),
            "");
  // Never an unexpected line: another message of the same file, the same
  // message from another file.
  EXPECT_NE(printed([] { log_line("ucs/datastruct/mpool.c", UCS_LOG_LEVEL_ERROR, "failed to allocate chunk"); })
                .find("failed to allocate"),
            std::string::npos);
  EXPECT_NE(printed([] { log_line("uct/tcp/tcp_ep.c", UCS_LOG_LEVEL_WARN, "object 0x1 was not returned"); })
                .find("object"),
            std::string::npos);
  rr::transport::ucx_log::count_loss(-1);
  EXPECT_NE(printed(mpool_warning).find("was not returned to mpool"), std::string::npos) << "the loss has closed";
}

}  // namespace
