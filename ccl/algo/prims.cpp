#include "algo/prims.h"

#include <algorithm>
#include <cstring>

namespace reccl::algo {

size_t Prims::chunkElems() const {
  size_t chunk = send_ ? send_->chunkBytes() : recv_->chunkBytes();
  return std::max<size_t>(1, chunk / c_.esize);
}

Result<std::span<const std::byte>> Prims::waitRecv(size_t bytes) {
  RECCL_ASSIGN_OR_RETURN(auto in, recv_->wait(deadline(), c_.desc));
  if (in.size() != bytes) {
    Status s(Errc::kInvalidUsage, "mismatched message size across ranks: expected " + std::to_string(bytes) +
                                         " bytes from rank " + std::to_string(recv_->id().peer) + ", got " +
                                         std::to_string(in.size()));
    recv_->fail(s);
    return s;
  }
  return in;
}

void Prims::combine(void* dst, const void* in, const void* src, size_t n) const {
  if (scale_)
    scale_->addScaled(dst, in, src, n);
  else
    c_.fn(dst, in, src, n);
}

void Prims::combine2(void* dst, void* dst2, const void* in, const void* src, size_t n) const {
  if (scale_)
    scale_->addScaled2(dst, dst2, in, src, n);
  else
    c_.fn2(dst, dst2, in, src, n);
}

Status Prims::send(const void* src, size_t n) {
  size_t bytes = n * c_.esize;
  RECCL_ASSIGN_OR_RETURN(auto out, send_->acquire(deadline()));
  if (bytes && scale_)
    scale_->scale(out.data(), src, n);
  else if (bytes)
    std::memcpy(out.data(), src, bytes);
  return send_->post(bytes, c_.desc);
}

Status Prims::sendUser(const void* src, size_t n) {
  size_t bytes = n * c_.esize;
  // A scaled step exists only in the slot.
  if (scale_ || !sendsFromUser(bytes)) return send(src, n);
  RECCL_TRY(send_->acquire(deadline()).status());
  return send_->postDirect(src, bytes, c_.desc);
}

Status Prims::finishDirect() {
  if (!send_ || send_->lastDirect() <= send_->acked()) return Status::Ok();
  return send_->waitAcked(send_->lastDirect(), deadline());
}

Status Prims::recv(void* dst, size_t n) {
  size_t bytes = n * c_.esize;
  RECCL_ASSIGN_OR_RETURN(auto in, waitRecv(bytes));
  if (bytes && !recv_->landedDirect(dst)) std::memcpy(dst, in.data(), bytes);
  return recv_->release();
}

void Prims::expectDirect(void* dst, size_t n, uint64_t ahead) {
  size_t bytes = n * c_.esize;
  if (!recv_ || c_.directMinBytes == 0 || bytes < c_.directMinBytes || ahead == 0) return;
  recv_->expectDirect(recv_->applied() + ahead, dst, bytes);
}

Status Prims::recvReduceSend(const void* src, size_t n) {
  size_t bytes = n * c_.esize;
  RECCL_ASSIGN_OR_RETURN(auto in, waitRecv(bytes));
  RECCL_ASSIGN_OR_RETURN(auto out, send_->acquire(deadline()));
  if (n) combine(out.data(), in.data(), src, n);
  RECCL_TRY(send_->post(bytes, c_.desc));
  return recv_->release();
}

Status Prims::recvReduceCopy(const void* src, void* dst, size_t n, bool finalize) {
  size_t bytes = n * c_.esize;
  RECCL_ASSIGN_OR_RETURN(auto in, waitRecv(bytes));
  if (n) {
    combine(dst, in.data(), src, n);
    if (finalize) reduce::finalizeAvg(dst, n, c_.dtype, c_.nranks);
  }
  return recv_->release();
}

bool Prims::sendsFromUser(size_t bytes) const {
  return c_.directSendMinBytes != 0 && bytes >= c_.directSendMinBytes && send_->sendsDirect();
}

Status Prims::recvReduceCopySend(const void* src, void* dst, size_t n, bool finalize) {
  size_t bytes = n * c_.esize;
  RECCL_ASSIGN_OR_RETURN(auto in, waitRecv(bytes));
  RECCL_ASSIGN_OR_RETURN(auto out, send_->acquire(deadline()));
  if (bytes && sendsFromUser(bytes)) {
    // The result is sent from dst itself: one store stream instead of two (dst and the slot),
    // the reduction's most expensive part on a memory-bound CPU.
    combine(dst, in.data(), src, n);
    if (finalize) reduce::finalizeAvg(dst, n, c_.dtype, c_.nranks);
    RECCL_TRY(send_->postDirect(dst, bytes, c_.desc));
    return recv_->release();
  }
  if (n && !finalize) {
    combine2(dst, out.data(), in.data(), src, n);
  } else if (n) {  // avg divides the result once, then sends the divided bits
    combine(dst, in.data(), src, n);
    reduce::finalizeAvg(dst, n, c_.dtype, c_.nranks);
    std::memcpy(out.data(), dst, bytes);
  }
  RECCL_TRY(send_->post(bytes, c_.desc));
  return recv_->release();
}

Status Prims::recvCopySend(void* dst, size_t n) {
  size_t bytes = n * c_.esize;
  RECCL_ASSIGN_OR_RETURN(auto in, waitRecv(bytes));
  RECCL_ASSIGN_OR_RETURN(auto out, send_->acquire(deadline()));
  if (bytes && recv_->landedDirect(dst)) {
    // Forwarded from where it landed: no copy at all on a transport that sends from there.
    if (sendsFromUser(bytes)) {
      RECCL_TRY(send_->postDirect(dst, bytes, c_.desc));
      return recv_->release();
    }
    std::memcpy(out.data(), dst, bytes);
  } else if (bytes) {
    std::memcpy(out.data(), in.data(), bytes);
    std::memcpy(dst, in.data(), bytes);
  }
  RECCL_TRY(send_->post(bytes, c_.desc));
  return recv_->release();
}

}  // namespace reccl::algo
