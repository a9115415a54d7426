#include "core/auth.h"

#include <sodium.h>

#include <cstring>
#include <mutex>

#include "channel/wire_bytes.h"
#include "core/wire.h"

namespace reccl::core {
namespace {

using channel::get;
using channel::put;

constexpr uint32_t kChallengeMagic = 0x4c484352;  // "RCHL"

const unsigned char* u8(const std::byte* p) { return reinterpret_cast<const unsigned char*>(p); }
unsigned char* u8(std::byte* p) { return reinterpret_cast<unsigned char*>(p); }

// HMAC-SHA-256 over label || parts..., keyed with `key`.
Tag mac(const Key& key, std::string_view label, std::initializer_list<std::span<const std::byte>> parts) {
  (void)initCrypto();
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, u8(key.data()), key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(label.data()), label.size());
  for (auto p : parts) crypto_auth_hmacsha256_update(&st, u8(p.data()), p.size());
  Tag t;
  crypto_auth_hmacsha256_final(&st, u8(t.data()));
  return t;
}

bool equalTag(const Tag& want, std::span<const std::byte> got) {
  return got.size() == want.size() && sodium_memcmp(want.data(), got.data(), want.size()) == 0;
}

Key sealKey(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce) {
  Tag t = mac(bootKey, "reccl-v3 seal", {clientNonce, serverNonce});
  Key k;
  std::memcpy(k.data(), t.data(), k.size());
  return k;
}

}  // namespace

Status initCrypto() {
  static int rc = sodium_init();  // thread-safe, idempotent; -1 only when no entropy source
  if (rc < 0) return Status(Errc::kSystem, "libsodium: initialisation failed (no random source)");
  return Status::Ok();
}

Nonce randomNonce() {
  (void)initCrypto();
  Nonce n;
  randombytes_buf(n.data(), n.size());
  return n;
}

Key randomKey() {
  (void)initCrypto();
  Key k;
  randombytes_buf(k.data(), k.size());
  return k;
}

Key deriveJobKey(std::span<const std::byte> secret) {
  (void)initCrypto();
  static constexpr char kPersonal[] = "reccl-v3 job key";
  Key k;
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, k.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(kPersonal), sizeof(kPersonal) - 1);
  crypto_generichash_update(&st, u8(secret.data()), secret.size());
  crypto_generichash_final(&st, u8(k.data()), k.size());
  return k;
}

bool isZeroKey(const Key& k) noexcept {
  std::byte acc{0};
  for (auto b : k) acc |= b;
  return acc == std::byte{0};
}

void wipeKey(Key& k) noexcept { sodium_memzero(k.data(), k.size()); }

void encodeChallenge(AuthPurpose purpose, const Nonce& serverNonce, std::span<std::byte, kChallengeBytes> out) noexcept {
  std::byte* p = out.data();
  put<uint32_t>(p, 0, kChallengeMagic);
  put<uint16_t>(p, 4, kProtocolVersion);
  put<uint16_t>(p, 6, static_cast<uint16_t>(purpose));
  std::memcpy(p + 8, serverNonce.data(), serverNonce.size());
}

Result<Nonce> decodeChallenge(std::span<const std::byte> in, AuthPurpose expect) {
  if (in.size() != kChallengeBytes) return Status(Errc::kProtocol, "challenge: wrong size");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kChallengeMagic) return Status(Errc::kProtocol, "challenge: bad magic (not a reccl port)");
  if (get<uint16_t>(p, 4) != kProtocolVersion)
    return Status(Errc::kProtocol, "challenge: protocol version " + std::to_string(get<uint16_t>(p, 4)) +
                                       " unsupported (this build speaks " + std::to_string(kProtocolVersion) + ")");
  if (get<uint16_t>(p, 6) != static_cast<uint16_t>(expect))
    return Status(Errc::kProtocol, "challenge: the port serves another purpose (" +
                                       std::to_string(get<uint16_t>(p, 6)) + ")");
  Nonce n;
  std::memcpy(n.data(), p + 8, n.size());
  return n;
}

Tag helloTag(const Key& key, const Nonce& serverNonce, std::span<const std::byte> hello) {
  return mac(key, "reccl-v3 hello", {serverNonce, hello});
}

bool verifyHelloTag(const Key& key, const Nonce& serverNonce, std::span<const std::byte> hello,
                    std::span<const std::byte> tag) {
  return equalTag(helloTag(key, serverNonce, hello), tag);
}

Tag proofTag(const Key& key, const Nonce& clientNonce, const Nonce& serverNonce) {
  return mac(key, "reccl-v3 proof", {clientNonce, serverNonce});
}

bool verifyProofTag(const Key& key, const Nonce& clientNonce, const Nonce& serverNonce, std::span<const std::byte> tag) {
  return equalTag(proofTag(key, clientNonce, serverNonce), tag);
}

Tag tableTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce, std::span<const std::byte> body) {
  return mac(bootKey, "reccl-v3 table", {clientNonce, serverNonce, body});
}

bool verifyTableTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce,
                    std::span<const std::byte> body, std::span<const std::byte> tag) {
  return equalTag(tableTag(bootKey, clientNonce, serverNonce, body), tag);
}

Tag blockTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce, std::span<const std::byte> body) {
  return mac(bootKey, "reccl-v3 block", {clientNonce, serverNonce, body});
}

Tag leaderTableTag(const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce,
                   std::span<const std::byte> body) {
  return mac(bootKey, "reccl-v3 leader table", {clientNonce, serverNonce, body});
}

bool equalTags(std::span<const std::byte> a, const Tag& b) { return equalTag(b, a); }

void sealCommSecret(const CommSecret& s, const Key& bootKey, const Nonce& clientNonce, const Nonce& serverNonce,
                    std::span<std::byte, kSealedCommSecretBytes> out) {
  static_assert(kSealedCommSecretBytes == kKeyBytes + 8 + crypto_secretbox_MACBYTES);
  std::array<std::byte, kKeyBytes + 8> plain;
  std::memcpy(plain.data(), s.key.data(), kKeyBytes);
  put<uint64_t>(plain.data(), kKeyBytes, s.commId);
  Key k = sealKey(bootKey, clientNonce, serverNonce);
  // The key is this connection's alone (derived from both nonces): a fixed box nonce is safe.
  std::array<unsigned char, crypto_secretbox_NONCEBYTES> boxNonce{};
  crypto_secretbox_easy(u8(out.data()), u8(plain.data()), plain.size(), boxNonce.data(), u8(k.data()));
  sodium_memzero(plain.data(), plain.size());
  sodium_memzero(k.data(), k.size());
}

Result<CommSecret> openCommSecret(std::span<const std::byte> sealed, const Key& bootKey, const Nonce& clientNonce,
                                  const Nonce& serverNonce) {
  if (sealed.size() != kSealedCommSecretBytes) return Status(Errc::kProtocol, "sealed communicator key: wrong size");
  Key k = sealKey(bootKey, clientNonce, serverNonce);
  std::array<std::byte, kKeyBytes + 8> plain;
  std::array<unsigned char, crypto_secretbox_NONCEBYTES> boxNonce{};
  int rc = crypto_secretbox_open_easy(u8(plain.data()), u8(sealed.data()), sealed.size(), boxNonce.data(), u8(k.data()));
  sodium_memzero(k.data(), k.size());
  if (rc != 0) return Status(Errc::kPermission, "the root's communicator key does not open with this job's secret");
  CommSecret s;
  std::memcpy(s.key.data(), plain.data(), kKeyBytes);
  s.commId = get<uint64_t>(plain.data(), kKeyBytes);
  sodium_memzero(plain.data(), plain.size());
  return s;
}

}  // namespace reccl::core
