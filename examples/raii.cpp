// The C++ layer (reccl.hpp, C++20): a Communicator owns its handle and destroys it on scope
// exit; typed calls take std::span; a Group runs a send and a receive together. Run it like
// allreduce.c (mpirun, srun, torchrun).
#include <reccl/reccl.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

int main() {
  reccl::Communicator world;
  if (recclResult_t r = reccl::Communicator::fromEnv(&world); r != recclSuccess) {
    std::fprintf(stderr, "init: %s: %s\n", recclGetErrorString(r), world.lastError().c_str());
    return 1;
  }
  const int rank = world.rank(), n = world.size();

  // Every rank contributes its rank; the all-gather returns 0, 1, ..., n-1 everywhere.
  std::vector<int32_t> mine{rank}, all(static_cast<size_t>(n), -1);
  if (world.allGather<int32_t>(mine, all) != recclSuccess) return 1;
  std::vector<int32_t> want(static_cast<size_t>(n));
  std::iota(want.begin(), want.end(), 0);

  // Even and odd ranks in communicators of their own, ordered by rank.
  reccl::Communicator half;
  if (world.split(rank % 2, rank, &half) != recclSuccess) return 1;
  std::vector<double> x{1.0};
  if (half.allReduce<double>(x, x, recclSum) != recclSuccess) return 1;
  const double halfSize = static_cast<double>((n - rank % 2 + 1) / 2);

  // A ring shift: each rank sends its rank to the next and receives the previous one's, the send
  // and the receive in one group so that neither waits for the other.
  std::vector<int32_t> give{rank}, got{-1};
  {
    reccl::Group g;
    if (g.start() != recclSuccess || world.send<int32_t>(give, (rank + 1) % n) != recclSuccess ||
        world.recv<int32_t>(got, (rank + n - 1) % n) != recclSuccess || g.end() != recclSuccess) {
      std::fprintf(stderr, "ring: %s\n", reccl::lastError().c_str());
      return 1;
    }
  }
  const bool ringOk = got[0] == (rank + n - 1) % n;

  const bool ok = all == want && x[0] == halfSize && ringOk;
  std::printf("rank %d of %d: allgather %s, split: %d ranks with parity %d, allreduce %s, ring %s\n", rank, n,
              all == want ? "ok" : "WRONG", half.size(), rank % 2, x[0] == halfSize ? "ok" : "WRONG",
              ringOk ? "ok" : "WRONG");
  if (half.finalize() != recclSuccess || world.finalize() != recclSuccess) return 1;
  return ok ? 0 : 1;  // half, then world, are destroyed here
}
