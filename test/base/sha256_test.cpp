#include "base/sha256.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kwatch::base {
namespace {

std::string hex(const Sha256& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : d) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// FIPS 180-2's examples.
TEST(Sha256, AnswersTheStandardsExamples) {
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, TheSameOnManyThreadsAtOnce) {
  const Sha256 want = sha256("global-default/alice");
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) wrong[t] += sha256("global-default/alice") != want;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(wrong[t], 0) << t;
}

}  // namespace
}  // namespace kwatch::base
