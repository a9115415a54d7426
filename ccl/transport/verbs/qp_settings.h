// The attributes of an RC queue pair's state changes (RESET -> INIT -> RTR -> RTS), computed as
// pure functions from the settings users know from NCCL and the two ends' connection info.
// Tested without RDMA hardware (tests/unit/ccl/verbs_pure_test.cpp).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "reccl/common/status.h"
#include "transport/verbs/conn_info.h"

namespace reccl::transport::verbs {

struct QpSettings {
  // RECCL_IB_TIMEOUT (NCCL_IB_TIMEOUT): one transport try waits 4.096 us x 2^timeout for its ACK.
  uint8_t timeout = 20;
  // RECCL_IB_RETRY_CNT (NCCL_IB_RETRY_CNT): retries after a timeout before the QP fails.
  uint8_t retryCnt = 7;
  // Receiver-not-ready retries: 7 = for ever. A peer short of receive requests is slow, not broken.
  uint8_t rnrRetry = 7;
  uint8_t minRnrTimer = 12;  // 0.64 ms before a retry after an RNR NAK (NCCL's value)
  uint8_t serviceLevel = 0;
  uint8_t trafficClass = 0;
  uint8_t hopLimit = 255;
  // A GID index forced by RECCL_IB_GID_INDEX (-1: the rail's own, see RailDevice).
  int gidIndex = -1;
};

// RECCL_IB_TIMEOUT, RECCL_IB_RETRY_CNT, RECCL_IB_GID_INDEX; a value out of range is an error
// naming the variable (0 would be an infinite timeout: a dead link would never be reported).
Result<QpSettings> qpSettingsFromParams();
// Checks the ranges above; the message names the field.
Status validateQpSettings(const QpSettings& s);

// 4.096 us x 2^timeout, in ns.
uint64_t ibTimeoutNs(uint8_t timeout) noexcept;
// When an RC QP whose peer stopped answering reports it: the first try and retryCnt retries
// each wait one timeout ((retryCnt + 1) x ibTimeoutNs). Hardware may wait up to 4x longer per
// try (the IB spec allows it); rxe uses the value as given.
uint64_t retryExhaustedNs(const QpSettings& s) noexcept;

// This end's port as the transitions need it.
struct LocalPort {
  uint8_t port = 1;
  uint16_t gidIndex = 0;
  ibv_mtu activeMtu = IBV_MTU_1024;
};

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

// RESET -> INIT: the port, pkey 0, and what the peer may do to this QP's memory (RDMA write).
QpTransition initTransition(const LocalPort& local) noexcept;
// INIT -> RTR: the peer's QPN, PSN and address; path MTU = the smaller of both ends' active MTU;
// RoCE (lid 0) is routed by GID (global route header), InfiniBand by LID.
QpTransition rtrTransition(const QpSettings& s, const LocalPort& local, const ConnInfo& remote) noexcept;
// RTR -> RTS: timeout and retries, this end's first PSN.
QpTransition rtsTransition(const QpSettings& s, uint32_t localPsn) noexcept;

// The MTU in bytes of an ibv_mtu code (0 for an unknown code).
uint32_t mtuBytes(ibv_mtu mtu) noexcept;

}  // namespace reccl::transport::verbs
