// Connection authentication. Every connection a rank accepts (bootstrap, data, standby,
// migration, relay control) starts with the acceptor's challenge, a fresh random nonce; the
// connecting side answers with its hello and a MAC over the challenge and the hello, keyed with
// a secret both must know; the acceptor then proves the same key over both nonces. A hello
// captured on the wire is worthless on any other connection (its MAC covers that connection's
// challenge), and a launcher's public values (address, port, world size) never make a key.
//
// Keys: the bootstrap key comes from the job secret (RECCL_JOB_SECRET / RECCL_JOB_SECRET_FILE,
// or the random secret inside a recclUniqueId); without one it is all zero and the bootstrap
// proves nothing. The communicator key is drawn by the root from the kernel's random source and
// handed to every rank sealed in the rank table; it guards everything after the bootstrap.
// docs/security.md has the threat model.
//
// MACs are HMAC-SHA-256 (libsodium), each over a distinct label so that no message's MAC can
// stand for another's. Pure functions over byte spans, fuzzed with the other wire parsers.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "reccl/common/status.h"

namespace reccl::core {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kTagBytes = 32;
inline constexpr size_t kChallengeBytes = 24;

// How long an accepted connection has to send its hello (and answer the challenge): a peer that
// connects and stays silent is dropped after this, not held.
inline constexpr auto kHelloGrace = std::chrono::seconds(5);

using Key = std::array<std::byte, kKeyBytes>;
using Nonce = std::array<std::byte, kNonceBytes>;
using Tag = std::array<std::byte, kTagBytes>;

// What a challenge opens: a rank answering the wrong kind of port fails early and clearly.
enum class AuthPurpose : uint16_t { kBootstrap = 1, kData = 2, kRelay = 3 };

// Initialises libsodium once; every function below calls it.
Status initCrypto();
Nonce randomNonce();
Key randomKey();
// The bootstrap key of a job secret (any bytes): a keyed hash, so the secret itself never
// leaves the process and two jobs' keys differ whenever their secrets do.
Key deriveJobKey(std::span<const std::byte> secret);
// True when every byte is zero (no job secret).
bool isZeroKey(const Key& k) noexcept;
// Overwrites a key in a way the compiler keeps.
void wipeKey(Key& k) noexcept;

// Challenge layout: 0 magic "RCHL" u32 | 4 version u16 | 6 purpose u16 | 8 nonce[16].
void encodeChallenge(AuthPurpose purpose, const Nonce& serverNonce, std::span<std::byte, kChallengeBytes> out) noexcept;
Result<Nonce> decodeChallenge(std::span<const std::byte> in, AuthPurpose expect);

// The connecting side's MAC over (server nonce, hello bytes) and the acceptor's proof over
// (client nonce, server nonce). Verification is constant-time.
Tag helloTag(const Key& key, const Nonce& serverNonce, std::span<const std::byte> hello);
bool verifyHelloTag(const Key& key, const Nonce& serverNonce, std::span<const std::byte> hello,
                    std::span<const std::byte> tag);
Tag proofTag(const Key& key, const Nonce& clientNonce, const Nonce& serverNonce);
bool verifyProofTag(const Key& key, const Nonce& clientNonce, const Nonce& serverNonce, std::span<const std::byte> tag);

// The root's MAC over what it sends a rank at the end of the bootstrap (table and sealed key).
Tag tableTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce, std::span<const std::byte> body);
bool verifyTableTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce,
                    std::span<const std::byte> body, std::span<const std::byte> tag);

// With several roots (core/bootstrap.h): a block's root's MAC over the block it sends the block's
// leader, and the leader's MAC over the full table it brings back to that root.
Tag blockTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce, std::span<const std::byte> body);
Tag leaderTableTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce,
                   std::span<const std::byte> body);
bool equalTags(std::span<const std::byte> a, const Tag& b);

// The communicator key and id sealed for one rank (XSalsa20-Poly1305 under a key derived from
// the bootstrap key and that connection's two nonces).
struct CommSecret {
  Key key{};
  uint64_t commId = 0;
};
inline constexpr size_t kSealedCommSecretBytes = kKeyBytes + 8 + 16;
void sealCommSecret(const CommSecret& s, const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce,
                    std::span<std::byte, kSealedCommSecretBytes> out);
Result<CommSecret> openCommSecret(std::span<const std::byte> sealed, const Key& bootKey, const Nonce& clientNonce,
                                  const Nonce& serverNonce);

}  // namespace reccl::core
