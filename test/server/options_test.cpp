#include "server/options.hpp"

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

TEST(Options, DefaultsMatchTheDocumentedOnes) {
  auto o = std::get<Options>(parse_options({}));
  EXPECT_EQ(o.bind_address, "127.0.0.1");
  EXPECT_EQ(o.port, 8080);
  EXPECT_EQ(o.storage_backend, "memory");
  EXPECT_EQ(o.data_dir, "");
  EXPECT_EQ(o.io_threads, 0u);
}

TEST(Options, AcceptsBothEqualsAndSeparateValues) {
  auto o = std::get<Options>(
      parse_options({"--port=9090", "--bind-address", "0.0.0.0", "--data-dir=/tmp/x",
                     "--io-threads", "3", "--storage-backend=memory"}));
  EXPECT_EQ(o.port, 9090);
  EXPECT_EQ(o.bind_address, "0.0.0.0");
  EXPECT_EQ(o.data_dir, "/tmp/x");
  EXPECT_EQ(o.io_threads, 3u);
}

TEST(Options, HelpAndVersionAreRecognised) {
  EXPECT_TRUE(std::holds_alternative<ParseHelp>(parse_options({"--help"})));
  EXPECT_TRUE(std::holds_alternative<ParseVersion>(parse_options({"--version"})));
}

TEST(Options, UnknownFlagsAndBadValuesAreErrors) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"--nope=1"}, {"--port=70000"}, {"--port=abc"}, {"--bind-address=999.1.1.1"},
           {"--storage-backend=sqlite"}, {"--io-threads=0"}, {"--port"}, {"positional"},
           {"--data-dir-fsync=maybe"}, {"--log-level=loud"}}) {
    auto outcome = parse_options(args);
    ASSERT_TRUE(std::holds_alternative<ParseError>(outcome)) << args[0];
    EXPECT_FALSE(std::get<ParseError>(outcome).message.empty());
  }
}

}  // namespace
}  // namespace kwatch::server
