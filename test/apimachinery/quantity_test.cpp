// Quantities stored as kube stores them (resource.Quantity's ParseQuantity, then MarshalJSON).
#include <gtest/gtest.h>

#include <string>

#include "apimachinery/quantity.hpp"

namespace kwatch::apimachinery {
namespace {

std::string canonical(std::string_view text) {
  std::string error;
  auto out = canonical_quantity(text, error);
  return out ? *out : "error: " + error;
}

TEST(Quantity, DecimalValuesTakeTheLargestSuffixThatKeepsThemWhole) {
  EXPECT_EQ(canonical("0.5"), "500m");
  EXPECT_EQ(canonical("1.5"), "1500m");
  EXPECT_EQ(canonical("1000"), "1k");
  EXPECT_EQ(canonical("1500"), "1500");
  EXPECT_EQ(canonical("1000m"), "1");
  EXPECT_EQ(canonical("100m"), "100m");
  EXPECT_EQ(canonical("0.1"), "100m");
  EXPECT_EQ(canonical("2000000"), "2M");
  EXPECT_EQ(canonical("1500k"), "1500k");
  EXPECT_EQ(canonical("1.5G"), "1500M");
  EXPECT_EQ(canonical("-0.5"), "-500m");
  EXPECT_EQ(canonical("0"), "0");
  EXPECT_EQ(canonical("0.000"), "0");
  EXPECT_EQ(canonical("-0"), "0");
  EXPECT_EQ(canonical("  250m "), "250m");
}

TEST(Quantity, BinaryValuesStayBinaryWhenWholeAndAtLeast1024) {
  EXPECT_EQ(canonical("1024Mi"), "1Gi");
  EXPECT_EQ(canonical("1.5Gi"), "1536Mi");
  EXPECT_EQ(canonical("1Ki"), "1Ki");
  EXPECT_EQ(canonical("2048Ki"), "2Mi");
  EXPECT_EQ(canonical("0.5Ki"), "512");       // under 1024: decimal
  EXPECT_EQ(canonical("1.1Ki"), "1126400m");  // fractional: decimal
  EXPECT_EQ(canonical("1000Ki"), "1000Ki");
  EXPECT_EQ(canonical("16Ei"), "9223372036854775807");  // capped at 2^63-1
  EXPECT_EQ(canonical("8.1Ei"), "9223372036854775807");
  EXPECT_EQ(canonical("1.1Ei"), "1268213655067531673600m");
}

TEST(Quantity, ExponentsStayExponents) {
  EXPECT_EQ(canonical("1e3"), "1e3");
  EXPECT_EQ(canonical("12e6"), "12e6");
  EXPECT_EQ(canonical("1e4"), "10e3");
  EXPECT_EQ(canonical("1e-3"), "1e-3");
  EXPECT_EQ(canonical("1.5e3"), "1500");  // exponent 0: no suffix
  EXPECT_EQ(canonical("1500e-3"), "1500e-3");
  // Huge exponents are held, not expanded.
  EXPECT_EQ(canonical("1e2000000000"), "100e1999999998");
}

TEST(Quantity, PrecisionPastNanoIsRoundedUp) {
  EXPECT_EQ(canonical("0.0000000001"), "1n");
  EXPECT_EQ(canonical("1.0000000001"), "1000000001n");
  EXPECT_EQ(canonical("-0.0000000001"), "-1n");
  EXPECT_EQ(canonical("1e-2000000000"), "1e-9");  // still an exponent
  EXPECT_EQ(canonical("0.9999999999"), "1");
}

// A core/v1 ResourceList's values are rounded up to milli-units (SetDefaults_ResourceList's
// RoundUp(-3)), keeping a text already at that scale as it was written.
TEST(Quantity, ResourceListValuesAreRoundedUpToMilliUnits) {
  const auto milli = [](std::string_view text) {
    std::string error;
    auto out = canonical_quantity(text, error, -3);
    return out ? *out : "error: " + error;
  };
  EXPECT_EQ(milli("100u"), "1m");
  EXPECT_EQ(milli("0.0001"), "1m");
  EXPECT_EQ(milli("1.0001"), "1001m");
  EXPECT_EQ(milli("-100u"), "-1m");
  EXPECT_EQ(milli("1e-4"), "1e-3");
  EXPECT_EQ(milli("250m"), "250m");
  EXPECT_EQ(milli("+1"), "+1");   // at the scale already: kept as written
  EXPECT_EQ(milli("0.5"), "500m");
  EXPECT_EQ(milli("1.5Gi"), "1536Mi");
  EXPECT_EQ(canonical("100u"), "100u");  // elsewhere nano precision stands
}

TEST(Quantity, CanonicalTextsGoStraightThroughAsGoKeepsThem) {
  EXPECT_EQ(canonical("+1"), "+1");
  EXPECT_EQ(canonical("01"), "01");
  EXPECT_EQ(canonical("+1Ki"), "+1Ki");
  EXPECT_EQ(canonical("1."), "1.");
  EXPECT_EQ(canonical("1E3"), "1E3");
  EXPECT_EQ(canonical("1e+3"), "1e+3");
  EXPECT_EQ(canonical("1e3"), "1e3");
}

TEST(Quantity, MalformedTextsAreRefusedInKubesWords) {
  for (const char* bad : {"", " ", "abc", "1.2.3", "1Gb", "--1", "1e", "1Ki2", "1 Gi", "0x10"}) {
    std::string error;
    EXPECT_FALSE(canonical_quantity(bad, error).has_value()) << bad;
    EXPECT_TRUE(error == kQuantityFormatError || error == "unable to parse quantity's suffix")
        << bad << ": " << error;
  }
  std::string error;
  canonical_quantity("1.2.3", error);
  EXPECT_EQ(error, kQuantityFormatError);
  canonical_quantity("1Gb", error);
  EXPECT_EQ(error, kQuantityFormatError);
  canonical_quantity("1ki", error);
  EXPECT_EQ(error, "unable to parse quantity's suffix");
}

std::string sum(std::string_view a, std::string_view b) {
  auto out = add_quantities(a, b);
  return out ? *out : "none";
}

// Quantity.Add: exact, in the first quantity's format, written as MarshalJSON writes it.
TEST(Quantity, SumsKeepTheFirstQuantitysFormat) {
  EXPECT_EQ(sum("100m", "200m"), "300m");
  EXPECT_EQ(sum("500m", "1"), "1500m");
  EXPECT_EQ(sum("1", "500m"), "1500m");
  EXPECT_EQ(sum("128Mi", "128Mi"), "256Mi");
  EXPECT_EQ(sum("1Gi", "500M"), "1573741824");  // binary, but no longer a whole multiple
  EXPECT_EQ(sum("500M", "1Gi"), "1573741824");
  EXPECT_EQ(sum("1e3", "1e3"), "2e3");
  EXPECT_EQ(sum("0", "64Mi"), "67108864");  // "0" is decimal
  EXPECT_EQ(sum("1", "-250m"), "750m");
  EXPECT_EQ(sum("-1", "250m"), "-750m");
  EXPECT_EQ(sum("2", "-2"), "0");
  EXPECT_EQ(sum("x", "1"), "none");
}

// Far-apart exponents are refused rather than written out digit by digit.
TEST(Quantity, SumsOfFarApartExponentsAreRefused) {
  EXPECT_EQ(sum("1e1000000000", "1m"), "none");
  EXPECT_EQ(sum("1e1000", "1"), "1" + std::string(999, '0') + "1");
}

TEST(Quantity, ComparisonsAsQuantityCmp) {
  EXPECT_EQ(compare_quantities("1", "1000m"), 0);
  EXPECT_EQ(compare_quantities("1Ki", "1024"), 0);
  EXPECT_EQ(compare_quantities("1.5", "1"), 1);
  EXPECT_EQ(compare_quantities("999m", "1"), -1);
  EXPECT_EQ(compare_quantities("13", "12.3"), 1);
  EXPECT_EQ(compare_quantities("12", "123e-1"), -1);
  EXPECT_EQ(compare_quantities("-2", "-1"), -1);
  EXPECT_EQ(compare_quantities("0", "-1"), 1);
  EXPECT_EQ(compare_quantities("1e1000000000", "1"), 1);  // compared without writing it out
  EXPECT_FALSE(compare_quantities("1", "x").has_value());
}

}  // namespace
}  // namespace kwatch::apimachinery
