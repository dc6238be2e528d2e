// SipHash-1-3 under a key drawn once per process: the hash of the tables that merge and check
// untrusted lists (strategic merge patch, structural schema list types), so that crafted
// collisions cannot make them quadratic. Header-only; each instance hashes one value.
// Thread-safety: the process key is initialised once (a function-local static); instances are
// not shared.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>

namespace kwatch::base {

class SipHash {
 public:
  explicit SipHash(std::uint8_t domain) {
    static const std::array<std::uint64_t, 2> kKey = [] {
      std::random_device rd;
      auto word = [&] { return (std::uint64_t{rd()} << 32) ^ rd(); };
      return std::array<std::uint64_t, 2>{word(), word()};
    }();
    v0_ = 0x736f6d6570736575ULL ^ kKey[0];
    v1_ = 0x646f72616e646f6dULL ^ kKey[1];
    v2_ = 0x6c7967656e657261ULL ^ kKey[0];
    v3_ = 0x7465646279746573ULL ^ kKey[1];
    write(&domain, 1);
  }
  void write(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    for (; n > 0 && tail_bytes_ != 0; --n) take(*p++);
    for (; n >= 8; n -= 8, p += 8) {
      std::uint64_t m;
      std::memcpy(&m, p, 8);
      compress(m);
    }
    for (; n > 0; --n) take(*p++);
  }
  void write(std::string_view s) { write(s.data(), s.size()); }
  void write_u64(std::uint64_t x) { write(&x, sizeof x); }
  std::uint64_t finish() {
    compress((std::uint64_t{total_ & 0xff} << 56) | tail_);
    v2_ ^= 0xff;
    round();
    round();
    round();
    return v0_ ^ v1_ ^ v2_ ^ v3_;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }
  void take(unsigned char c) {
    tail_ |= std::uint64_t{c} << (8 * tail_bytes_);
    if (++tail_bytes_ == 8) {
      compress(tail_);
      tail_ = 0;
      tail_bytes_ = 0;
    }
  }
  void compress(std::uint64_t m) {
    v3_ ^= m;
    round();
    v0_ ^= m;
  }
  void round() {
    v0_ += v1_;
    v1_ = rotl(v1_, 13);
    v1_ ^= v0_;
    v0_ = rotl(v0_, 32);
    v2_ += v3_;
    v3_ = rotl(v3_, 16);
    v3_ ^= v2_;
    v0_ += v3_;
    v3_ = rotl(v3_, 21);
    v3_ ^= v0_;
    v2_ += v1_;
    v1_ = rotl(v1_, 17);
    v1_ ^= v2_;
    v2_ = rotl(v2_, 32);
  }

  std::uint64_t v0_, v1_, v2_, v3_;
  std::uint64_t tail_ = 0;
  std::size_t tail_bytes_ = 0;
  std::size_t total_ = 0;
};

}  // namespace kwatch::base
