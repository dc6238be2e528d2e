#include "apimachinery/cbor.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace kwatch::apimachinery {
namespace {

namespace json = boost::json;

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string cbor_of(const json::value& v, const CborByteStrings* bytes = nullptr) {
  std::string out;
  EXPECT_TRUE(append_cbor(out, v, bytes));
  return hex(out);
}

// RFC 8949 Appendix A's examples of integers and simple values.
TEST(Cbor, IntegersTakeTheirShortestHead) {
  EXPECT_EQ(cbor_of(0), "00");
  EXPECT_EQ(cbor_of(23), "17");
  EXPECT_EQ(cbor_of(24), "1818");
  EXPECT_EQ(cbor_of(100), "1864");
  EXPECT_EQ(cbor_of(1000), "1903e8");
  EXPECT_EQ(cbor_of(1000000), "1a000f4240");
  EXPECT_EQ(cbor_of(1000000000000), "1b000000e8d4a51000");
  EXPECT_EQ(cbor_of(json::value(18446744073709551615ULL)), "1bffffffffffffffff");
  EXPECT_EQ(cbor_of(-1), "20");
  EXPECT_EQ(cbor_of(-10), "29");
  EXPECT_EQ(cbor_of(-100), "3863");
  EXPECT_EQ(cbor_of(-1000), "3903e7");
  EXPECT_EQ(cbor_of(json::value(INT64_MIN)), "3b7fffffffffffffff");
  EXPECT_EQ(cbor_of(false), "f4");
  EXPECT_EQ(cbor_of(true), "f5");
  EXPECT_EQ(cbor_of(nullptr), "f6");
}

// Floats in the shortest of half, single and double precision that keeps the value (kube's
// ShortestFloat16), as RFC 8949 Appendix A writes them.
TEST(Cbor, FloatsTakeTheShortestPrecisionThatKeepsTheirValue) {
  EXPECT_EQ(cbor_of(0.0), "f90000");
  EXPECT_EQ(cbor_of(-0.0), "f98000");
  EXPECT_EQ(cbor_of(1.0), "f93c00");
  EXPECT_EQ(cbor_of(1.5), "f93e00");
  EXPECT_EQ(cbor_of(65504.0), "f97bff");
  EXPECT_EQ(cbor_of(-4.0), "f9c400");
  EXPECT_EQ(cbor_of(5.960464477539063e-8), "f90001");  // half's smallest subnormal
  EXPECT_EQ(cbor_of(0.00006103515625), "f90400");      // half's smallest normal
  EXPECT_EQ(cbor_of(100000.0), "fa47c35000");
  EXPECT_EQ(cbor_of(3.4028234663852886e+38), "fa7f7fffff");
  EXPECT_EQ(cbor_of(1.1), "fb3ff199999999999a");
  EXPECT_EQ(cbor_of(1.0e+300), "fb7e37e43c8800759c");
  EXPECT_EQ(cbor_of(-4.1), "fbc010666666666666");
  // One more bit than half holds: single precision.
  EXPECT_EQ(cbor_of(1.00048828125), "fa3f801000");
}

// kube writes Go strings, and map keys, as byte strings.
TEST(Cbor, StringsAndKeysAreByteStrings) {
  EXPECT_EQ(cbor_of(""), "40");
  EXPECT_EQ(cbor_of("a"), "4161");
  EXPECT_EQ(cbor_of(json::parse(R"(["a",[1,2]])")), "824161820102");
  EXPECT_EQ(cbor_of(json::parse(R"({"a":1})")), "a1416101");
  EXPECT_EQ(cbor_of(json::array()), "80");
  EXPECT_EQ(cbor_of(json::object()), "a0");
  const std::string long_text(300, 'x');
  EXPECT_EQ(cbor_of(json::value(long_text)).substr(0, 6), "59012c");
}

// RFC 8949 4.2.1: entries in the bytewise order of their encoded keys, so by length first.
TEST(Cbor, MapEntriesAreInTheOrderOfTheirEncodedKeys) {
  const auto v = json::parse(R"({"metadata":1,"kind":2,"apiVersion":3,"items":4,"b":5,"a":6})");
  EXPECT_EQ(cbor_of(v),
            "a6" "416106" "416205" "446b696e6402" "456974656d7304" "486d6574616461746101"
            "4a61706956657273696f6e03");
  EXPECT_TRUE(cbor_key_less("kind", "items"));
  EXPECT_TRUE(cbor_key_less("a", "b"));
  EXPECT_FALSE(cbor_key_less("b", "a"));
}

// A Go []byte (base64 in JSON): its bytes as a byte string in tag 22, as kube writes them.
TEST(Cbor, ByteFieldsAreTheirBytesInTag22) {
  const auto v = json::parse(R"({"data":{"k":"dmFsdWU="},"note":"dmFsdWU="})");
  CborByteStrings bytes{&v.at("data").at("k")};
  EXPECT_EQ(cbor_of(v, &bytes), "a2" "4464617461" "a1" "416b" "d6" "4576616c7565"
                                "446e6f7465" "48646d46736457553d");
  const auto bad = json::parse(R"({"k":"not base64!"})");
  CborByteStrings bad_bytes{&bad.at("k")};
  std::string out;
  EXPECT_FALSE(append_cbor(out, bad, &bad_bytes));
}

TEST(Cbor, TheSelfDescribedTagIsTag55799) {
  std::string out;
  append_cbor_head(out, 6, 55799);
  EXPECT_EQ(out, kCborSelfDescribed);
}

std::string bytes_of(std::string_view hex_text) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex_text.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex_text.substr(i, 2)), nullptr, 16));
  }
  return out;
}

// Why a body does not decode ("" when it does).
std::string refusal(std::string_view hex_text) {
  std::string why;
  parse_cbor(bytes_of(hex_text), why);
  return why;
}

TEST(CborBody, ReadsBackWhatTheEncoderWrites) {
  const auto v = json::parse(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"y"}},)"
      R"("data":{"k":"v"},"n":[1,-2,1.5,100000.5,1.1,true,false,null,""]})");
  std::string body(kCborSelfDescribed);
  ASSERT_TRUE(append_cbor(body, v));
  std::string why;
  const json::value back = parse_cbor(body, why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(back, v) << json::serialize(back);  // members compared in any order
}

// RFC 8949's examples of what a decoder reads: text strings, indefinite lengths, tags.
TEST(CborBody, ReadsTextStringsIndefiniteLengthsAndTags) {
  std::string why;
  // {_ "a": 1, "b": [_ 2, 3]}
  auto v = parse_cbor(bytes_of("bf61610161629f0203ffff"), why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(json::serialize(v), R"({"a":1,"b":[2,3]})");
  // (_ h'0102', h'030405') and (_ "strea", "ming"); a tag 0 time read as its text.
  v = parse_cbor(bytes_of("a2" "6173" "7f657374726561646d696e67ff" "6174" "c074323031332d30332d32315432303a30343a30305a"), why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(json::serialize(v), R"({"s":"streaming","t":"2013-03-21T20:04:00Z"})");
  // Half, single and double floats.
  v = parse_cbor(bytes_of("83f93e00fa47c35000fb3ff199999999999a"), why);
  EXPECT_EQ(json::serialize(v), "[1.5E0,1E5,1.1E0]");
}

// Byte strings are recorded where they end up (so a caller turns a Go []byte's into base64).
TEST(CborBody, RecordsWhereByteStringsEndUp) {
  std::string why;
  CborByteStrings bytes;
  // {h'64': {h'6b': 22(h'0001')}, h'74': "x", h'6c': [h'ff', "y"], h'69': [_ h'01']}
  const auto v = parse_cbor(
      bytes_of("a4" "4164" "a1416b" "d6420001" "4174" "6178" "416c" "8241ff6179" "4169" "9f4101ff"),
      why, &bytes);
  ASSERT_EQ(why, "");
  EXPECT_EQ(bytes.size(), 3u);
  EXPECT_TRUE(bytes.contains(&v.at("d").at("k")));
  EXPECT_TRUE(bytes.contains(&v.at("l").at(0)));
  EXPECT_TRUE(bytes.contains(&v.at("i").at(0)));
  EXPECT_FALSE(bytes.contains(&v.at("t"))) << "a text string";
}

// What kube's decoder refuses, refused with why; nothing a body declares is allocated before
// the body backs it.
TEST(CborBody, RefusesWhatKubeRefuses) {
  EXPECT_NE(refusal("a2416101416102"), "") << "a duplicate map key";
  EXPECT_NE(refusal("a1016101"), "") << "a map key that is not a string";
  EXPECT_NE(refusal("62c328"), "") << "invalid UTF-8 in a text string";
  EXPECT_NE(refusal("f97e00"), "") << "NaN";
  EXPECT_NE(refusal("f97c00"), "") << "infinity";
  EXPECT_NE(refusal("1bffffffffffffffff"), "") << "an integer past int64";
  EXPECT_NE(refusal("0102"), "") << "data after the first item";
  EXPECT_NE(refusal("a161"), "") << "truncated";
  EXPECT_NE(refusal("9b00000000ffffffff"), "") << "a count the body cannot back";
  EXPECT_NE(refusal("5b00000000ffffffff"), "") << "a length the body cannot back";
  EXPECT_NE(refusal("e0"), "") << "a simple value JSON has not";
  EXPECT_NE(refusal("ff"), "") << "a break outside an indefinite item";
  EXPECT_NE(refusal("1c"), "") << "reserved additional information";
  // 65 levels of arrays; 64 are read.
  std::string deep;
  for (int i = 0; i < 65; ++i) deep += "81";
  EXPECT_NE(refusal(deep + "00"), "") << "more than 64 levels";
  EXPECT_EQ(refusal(deep.substr(2) + "00"), "") << "64 levels";
  // 1,025 elements, definite and indefinite.
  std::string many = "990401";
  std::string many_indefinite = "9f";
  for (int i = 0; i < 1025; ++i) {
    many += "00";
    many_indefinite += "00";
  }
  EXPECT_NE(refusal(many), "") << "more than 1024 elements";
  EXPECT_NE(refusal(many_indefinite + "ff"), "") << "more than 1024 elements, indefinite";
  EXPECT_EQ(refusal("990400" + many.substr(8)), "") << "1024 elements";
}

}  // namespace
}  // namespace kwatch::apimachinery
