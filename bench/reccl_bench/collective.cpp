#include "collective.h"

#include <string>

#include "reduce/reduce.h"

namespace reccl::bench {

const char* collName(Coll c) noexcept {
  switch (c) {
    case Coll::kAllReduce: return "allreduce";
    case Coll::kAllGather: return "allgather";
    case Coll::kReduceScatter: return "reducescatter";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kReduce: return "reduce";
    case Coll::kAllToAll: return "alltoall";
    case Coll::kSendRecv: return "sendrecv";
    case Coll::kGather: return "gather";
    case Coll::kScatter: return "scatter";
  }
  return "unknown";
}

std::optional<Coll> parseColl(std::string_view name) noexcept {
  std::string n;
  for (char ch : name)
    if (ch != '_' && ch != '-') n += char(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "perf") == 0) n.resize(n.size() - 4);
  if (n == "allreduce") return Coll::kAllReduce;
  if (n == "allgather") return Coll::kAllGather;
  if (n == "reducescatter") return Coll::kReduceScatter;
  if (n == "broadcast" || n == "bcast") return Coll::kBroadcast;
  if (n == "reduce") return Coll::kReduce;
  if (n == "alltoall") return Coll::kAllToAll;
  if (n == "sendrecv") return Coll::kSendRecv;
  if (n == "gather") return Coll::kGather;
  if (n == "scatter") return Coll::kScatter;
  return std::nullopt;
}

bool collReduces(Coll c) noexcept {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
bool collHasRoot(Coll c) noexcept {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}
bool collHasInPlace(Coll c) noexcept { return c != Coll::kAllToAll && c != Coll::kSendRecv; }

const char* opName(recclRedOp_t op) noexcept { return op == reduce::kPreMulSum ? "mulsum" : reduce::opName(op); }

std::vector<int> rootsOf(Coll c, int rootOption, int nranks) {
  if (!collHasRoot(c)) return {-1};
  if (rootOption >= 0) return {rootOption};
  std::vector<int> all;
  for (int r = 0; r < nranks; ++r) all.push_back(r);
  return all;
}

double busBwFactor(Coll c, int nranks) noexcept {
  double n = nranks;
  switch (c) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter: return (n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv: return 1.0;
  }
  return 1.0;
}

size_t roundCount(Coll c, size_t count, int nranks) noexcept {
  if (nranks <= 0) return 0;
  switch (c) {
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter: return count / size_t(nranks) * size_t(nranks);
    default: return count;
  }
}

Shape shapeFor(Coll c, size_t count, int nranks, int rank) noexcept {
  Shape s;
  s.count = roundCount(c, count, nranks);
  const size_t per = nranks > 0 ? s.count / size_t(nranks) : 0;
  switch (c) {
    case Coll::kAllGather:
    case Coll::kGather:  // recvbuff is root's alone; every rank has one, as in nccl-tests
      s.paramCount = per;
      s.sendCount = per;
      s.recvCount = s.count;
      s.inPlaceSendOffset = size_t(rank) * per;
      break;
    case Coll::kReduceScatter:
    case Coll::kScatter:  // sendbuff is read at root alone
      s.paramCount = per;
      s.sendCount = s.count;
      s.recvCount = per;
      s.inPlaceRecvOffset = size_t(rank) * per;
      break;
    case Coll::kAllToAll:
      s.paramCount = per;
      s.sendCount = s.count;
      s.recvCount = s.count;
      break;
    default:
      s.paramCount = s.count;
      s.sendCount = s.count;
      s.recvCount = s.count;
      break;
  }
  return s;
}

}  // namespace reccl::bench
