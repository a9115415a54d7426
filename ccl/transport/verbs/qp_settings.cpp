#include "transport/verbs/qp_settings.h"

#include <algorithm>
#include <string>

#include "reccl/common/params.h"

namespace reccl::transport::verbs {

namespace {
constexpr const char* kInfiniteTimeout = " (0, an infinite timeout, would hide a dead link)";

Status inRange(const char* name, int64_t v, int64_t lo, int64_t hi, const char* why = "") {
  if (v >= lo && v <= hi) return Status::Ok();
  return Status(Errc::kInvalidArgument, std::string(name) + "=" + std::to_string(v) + ": expected " +
                                            std::to_string(lo) + ".." + std::to_string(hi) + why);
}
}  // namespace

Status validateQpSettings(const QpSettings& s) {
  RECCL_TRY(inRange("RECCL_IB_TIMEOUT", s.timeout, 1, 31, kInfiniteTimeout));
  RECCL_TRY(inRange("RECCL_IB_RETRY_CNT", s.retryCnt, 0, 7));
  RECCL_TRY(inRange("RECCL_IB_GID_INDEX", s.gidIndex, -1, 0xffff));
  RECCL_TRY(inRange("rnr retry", s.rnrRetry, 0, 7));
  RECCL_TRY(inRange("min rnr timer", s.minRnrTimer, 0, 31));
  return inRange("service level", s.serviceLevel, 0, 15);
}

Result<QpSettings> qpSettingsFromParams() {
  // Range-checked before narrowing, so 276 is not taken for 20.
  const int64_t timeout = params::IbTimeout(), retry = params::IbRetryCnt(), gid = params::IbGidIndex();
  RECCL_TRY(inRange("RECCL_IB_TIMEOUT", timeout, 1, 31, kInfiniteTimeout));
  RECCL_TRY(inRange("RECCL_IB_RETRY_CNT", retry, 0, 7));
  RECCL_TRY(inRange("RECCL_IB_GID_INDEX", gid, -1, 0xffff));
  QpSettings s;
  s.timeout = static_cast<uint8_t>(timeout);
  s.retryCnt = static_cast<uint8_t>(retry);
  s.gidIndex = static_cast<int>(gid);
  return s;
}

uint64_t ibTimeoutNs(uint8_t timeout) noexcept { return timeout > 31 ? 0 : 4096ull << timeout; }

uint64_t retryExhaustedNs(const QpSettings& s) noexcept { return (uint64_t{s.retryCnt} + 1) * ibTimeoutNs(s.timeout); }

QpTransition initTransition(const LocalPort& local) noexcept {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = 0;
  t.attr.port_num = local.port;
  t.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

QpTransition rtrTransition(const QpSettings& s, const LocalPort& local, const ConnInfo& remote) noexcept {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(local.activeMtu, remote.mtu));
  t.attr.dest_qp_num = remote.qpn;
  t.attr.rq_psn = remote.psn;
  // Only RDMA writes and sends cross these QPs: no reads or atomics to serve.
  t.attr.max_dest_rd_atomic = 1;
  t.attr.min_rnr_timer = s.minRnrTimer;
  t.attr.ah_attr.port_num = local.port;
  t.attr.ah_attr.sl = s.serviceLevel;
  if (remote.lid == 0) {
    t.attr.ah_attr.is_global = 1;
    std::copy(remote.gid.begin(), remote.gid.end(), t.attr.ah_attr.grh.dgid.raw);
    t.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gidIndex);
    t.attr.ah_attr.grh.hop_limit = s.hopLimit;
    t.attr.ah_attr.grh.traffic_class = s.trafficClass;
  } else {
    t.attr.ah_attr.dlid = remote.lid;
  }
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition rtsTransition(const QpSettings& s, uint32_t localPsn) noexcept {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.timeout = s.timeout;
  t.attr.retry_cnt = s.retryCnt;
  t.attr.rnr_retry = s.rnrRetry;
  t.attr.sq_psn = localPsn & 0xffffff;
  t.attr.max_rd_atomic = 1;
  t.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

uint32_t mtuBytes(ibv_mtu mtu) noexcept {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

}  // namespace reccl::transport::verbs
