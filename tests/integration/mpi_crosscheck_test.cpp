// Every collective against Debian's OpenMPI on the same inputs: run under
// mpirun, each rank computes each collective with MPI and with ringreduce and
// compares. Integers must agree exactly; doubles within the rounding of
// different summation orders.

#include <gtest/gtest.h>
#include <mpi.h>
#include <ringreduce/ringreduce.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

rrComm_t g_comm = nullptr;
int g_rank = 0;
int g_size = 1;

template <typename T>
std::vector<T> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(g_rank));
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = std::uniform_real_distribution<T>(-10, 10)(rng);
    } else {
      x = static_cast<T>(rng() % 2001) - 1000;
    }
  }
  return v;
}

template <typename T>
void expect_close(const std::vector<T>& ours, const std::vector<T>& theirs, const char* what) {
  ASSERT_EQ(ours.size(), theirs.size()) << what;
  size_t wrong = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const bool same = std::is_floating_point_v<T>
                          ? std::fabs(static_cast<double>(ours[i] - theirs[i])) <= 1e-12 * (1 + std::fabs(static_cast<double>(theirs[i])))
                          : ours[i] == theirs[i];
    if (!same && wrong++ < 5) ADD_FAILURE() << what << " element " << i << ": ringreduce " << ours[i] << ", MPI " << theirs[i];
  }
  EXPECT_EQ(wrong, 0u) << what;
}

struct MpiOp {
  rrRedOp_t rr;
  MPI_Op mpi;
};

TEST(AgainstOpenMpi, AllReduceReduceAndReduceScatter) {
  const size_t block = 10007;
  for (MpiOp op : {MpiOp{rrSum, MPI_SUM}, MpiOp{rrMax, MPI_MAX}, MpiOp{rrMin, MPI_MIN}}) {
    auto ints = random_vector<int32_t>(block * static_cast<size_t>(g_size), 1 + op.rr);
    auto reals = random_vector<double>(block * static_cast<size_t>(g_size), 2 + op.rr);
    std::vector<int32_t> ours(ints.size()), theirs(ints.size());
    ASSERT_EQ(rrAllReduce(ints.data(), ours.data(), ints.size(), rrInt32, op.rr, g_comm, nullptr), rrSuccess);
    MPI_Allreduce(ints.data(), theirs.data(), static_cast<int>(ints.size()), MPI_INT32_T, op.mpi, MPI_COMM_WORLD);
    expect_close(ours, theirs, "allreduce int32");
    std::vector<double> ours_d(reals.size()), theirs_d(reals.size());
    ASSERT_EQ(rrAllReduce(reals.data(), ours_d.data(), reals.size(), rrFloat64, op.rr, g_comm, nullptr), rrSuccess);
    MPI_Allreduce(reals.data(), theirs_d.data(), static_cast<int>(reals.size()), MPI_DOUBLE, op.mpi, MPI_COMM_WORLD);
    expect_close(ours_d, theirs_d, "allreduce float64");

    std::vector<int32_t> ours_r(ints.size(), 0), theirs_r(ints.size(), 0);
    ASSERT_EQ(rrReduce(ints.data(), ours_r.data(), ints.size(), rrInt32, op.rr, g_size - 1, g_comm, nullptr), rrSuccess);
    MPI_Reduce(ints.data(), theirs_r.data(), static_cast<int>(ints.size()), MPI_INT32_T, op.mpi, g_size - 1, MPI_COMM_WORLD);
    if (g_rank == g_size - 1) expect_close(ours_r, theirs_r, "reduce int32");

    std::vector<int32_t> ours_s(block), theirs_s(block);
    ASSERT_EQ(rrReduceScatter(ints.data(), ours_s.data(), block, rrInt32, op.rr, g_comm, nullptr), rrSuccess);
    MPI_Reduce_scatter_block(ints.data(), theirs_s.data(), static_cast<int>(block), MPI_INT32_T, op.mpi, MPI_COMM_WORLD);
    expect_close(ours_s, theirs_s, "reduce-scatter int32");
  }
}

TEST(AgainstOpenMpi, BitwiseOps) {
  const size_t block = 4099;
  for (MpiOp op : {MpiOp{rrBand, MPI_BAND}, MpiOp{rrBor, MPI_BOR}, MpiOp{rrBxor, MPI_BXOR}}) {
    auto ints = random_vector<int32_t>(block * static_cast<size_t>(g_size), 30 + op.rr);
    auto wide = random_vector<uint64_t>(block * static_cast<size_t>(g_size), 40 + op.rr);
    std::vector<int32_t> ours(ints.size()), theirs(ints.size());
    ASSERT_EQ(rrAllReduce(ints.data(), ours.data(), ints.size(), rrInt32, op.rr, g_comm, nullptr), rrSuccess);
    MPI_Allreduce(ints.data(), theirs.data(), static_cast<int>(ints.size()), MPI_INT32_T, op.mpi, MPI_COMM_WORLD);
    expect_close(ours, theirs, "allreduce int32");
    std::vector<uint64_t> ours_w(block), theirs_w(block);
    ASSERT_EQ(rrReduceScatter(wide.data(), ours_w.data(), block, rrUint64, op.rr, g_comm, nullptr), rrSuccess);
    MPI_Reduce_scatter_block(wide.data(), theirs_w.data(), static_cast<int>(block), MPI_UINT64_T, op.mpi,
                             MPI_COMM_WORLD);
    expect_close(ours_w, theirs_w, "reduce-scatter uint64");
  }
}

TEST(AgainstOpenMpi, UnevenAllToAll) {
  // counts[s][r] = what rank s sends rank r, the same on every rank; blocks
  // packed in rank order on both sides.
  const size_t n = static_cast<size_t>(g_size);
  std::mt19937_64 shared(77);
  std::vector<size_t> counts(n * n);
  for (size_t& c : counts) c = shared() % 3 == 0 ? 0 : shared() % 5000;
  const size_t me = static_cast<size_t>(g_rank);
  std::vector<size_t> sendcounts(n), sdispls(n), recvcounts(n), rdispls(n);
  std::vector<int> isendcounts(n), isdispls(n), irecvcounts(n), irdispls(n);
  size_t send_total = 0, recv_total = 0;
  for (size_t p = 0; p < n; ++p) {
    sendcounts[p] = counts[me * n + p];
    recvcounts[p] = counts[p * n + me];
    sdispls[p] = send_total;
    rdispls[p] = recv_total;
    send_total += sendcounts[p];
    recv_total += recvcounts[p];
    isendcounts[p] = static_cast<int>(sendcounts[p]);
    irecvcounts[p] = static_cast<int>(recvcounts[p]);
    isdispls[p] = static_cast<int>(sdispls[p]);
    irdispls[p] = static_cast<int>(rdispls[p]);
  }
  auto send = random_vector<int32_t>(send_total, 55);
  std::vector<int32_t> ours(recv_total, -1), theirs(recv_total, -2);
  ASSERT_EQ(rrAllToAllv(send.data(), sendcounts.data(), sdispls.data(), ours.data(), recvcounts.data(), rdispls.data(),
                        rrInt32, g_comm, nullptr),
            rrSuccess)
      << rrGetLastError(g_comm);
  MPI_Alltoallv(send.data(), isendcounts.data(), isdispls.data(), MPI_INT32_T, theirs.data(), irecvcounts.data(),
                irdispls.data(), MPI_INT32_T, MPI_COMM_WORLD);
  expect_close(ours, theirs, "all-to-all-v");
}

TEST(AgainstOpenMpi, DataMovement) {
  const size_t block = 4099;
  const size_t n = static_cast<size_t>(g_size);
  auto mine = random_vector<int64_t>(block, 11);
  auto blocks = random_vector<int64_t>(block * n, 12);
  std::vector<int64_t> ours(block * n), theirs(block * n);

  ASSERT_EQ(rrAllGather(mine.data(), ours.data(), block, rrInt64, g_comm, nullptr), rrSuccess);
  MPI_Allgather(mine.data(), static_cast<int>(block), MPI_INT64_T, theirs.data(), static_cast<int>(block), MPI_INT64_T,
                MPI_COMM_WORLD);
  expect_close(ours, theirs, "all-gather");

  ASSERT_EQ(rrAllToAll(blocks.data(), ours.data(), block, rrInt64, g_comm, nullptr), rrSuccess);
  MPI_Alltoall(blocks.data(), static_cast<int>(block), MPI_INT64_T, theirs.data(), static_cast<int>(block), MPI_INT64_T,
               MPI_COMM_WORLD);
  expect_close(ours, theirs, "all-to-all");

  const int root = g_size - 1;
  ASSERT_EQ(rrGather(mine.data(), ours.data(), block, rrInt64, root, g_comm, nullptr), rrSuccess);
  MPI_Gather(mine.data(), static_cast<int>(block), MPI_INT64_T, theirs.data(), static_cast<int>(block), MPI_INT64_T,
             root, MPI_COMM_WORLD);
  if (g_rank == root) expect_close(ours, theirs, "gather");

  std::vector<int64_t> ours_one(block), theirs_one(block);
  ASSERT_EQ(rrScatter(blocks.data(), ours_one.data(), block, rrInt64, root, g_comm, nullptr), rrSuccess);
  MPI_Scatter(blocks.data(), static_cast<int>(block), MPI_INT64_T, theirs_one.data(), static_cast<int>(block),
              MPI_INT64_T, root, MPI_COMM_WORLD);
  expect_close(ours_one, theirs_one, "scatter");

  ours_one = mine;
  theirs_one = mine;
  ASSERT_EQ(rrBroadcast(ours_one.data(), ours_one.data(), block, rrInt64, root, g_comm, nullptr), rrSuccess);
  MPI_Bcast(theirs_one.data(), static_cast<int>(block), MPI_INT64_T, root, MPI_COMM_WORLD);
  expect_close(ours_one, theirs_one, "broadcast");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (rrCommInitFromEnv(&g_comm) != rrSuccess) {
    std::fprintf(stderr, "rrCommInitFromEnv under mpirun: %s\n", rrGetLastError(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  rrCommUserRank(g_comm, &g_rank);
  rrCommCount(g_comm, &g_size);
  int mpi_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  if (mpi_rank != g_rank) {
    std::fprintf(stderr, "rank mismatch: MPI %d, ringreduce %d\n", mpi_rank, g_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int result = RUN_ALL_TESTS();
  rrCommDestroy(g_comm);
  MPI_Finalize();
  return result;
}
