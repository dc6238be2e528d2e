#include "cel/libraries.hpp"

#include <gtest/gtest.h>

#include <string>

#include "cel/literal.hpp"
#include "cel/parser.hpp"
#include "cel/program.hpp"

namespace kwatch::cel {
namespace {

std::string eval(std::string_view source) {
  Parsed p = parse(source);
  if (!p.errors.empty()) return "parse error: " + p.errors.front().message;
  Declarations decls;
  decls.functions = &kubernetes_functions();
  const EvalResult r = Program::compile(p.ast, decls).evaluate({});
  if (r.value.is_error()) return "error: " + std::string(r.value.as_text());
  return format_literal(r.value);
}

TEST(CelLibraries, StringsCountCodePointsAndFollowGo) {
  EXPECT_EQ(eval("'héllo'.charAt(1) + 'héllo'.charAt(5)"), "\"é\"");
  EXPECT_EQ(eval("'héllo'.charAt(6)"), "error: index out of range: 6");
  EXPECT_EQ(eval("['héllo'.indexOf('l'), 'héllo'.lastIndexOf('l'), 'abc'.indexOf('', 9)]"),
            "[2, 3, 3]");
  EXPECT_EQ(eval("'héllo'.indexOf('l', -1)"), "error: index out of range: -1");
  EXPECT_EQ(eval("'a,b,,c'.split(',')"), "[\"a\", \"b\", \"\", \"c\"]");
  EXPECT_EQ(eval("'a,b,c'.split(',', 2)"), "[\"a\", \"b,c\"]");
  EXPECT_EQ(eval("'a,b,c'.split(',', 0)"), "[]");
  EXPECT_EQ(eval("'héj'.split('')"), "[\"h\", \"é\", \"j\"]");
  EXPECT_EQ(eval("'aaa'.replace('a', 'b', 2) + 'ab'.replace('', '-')"), "\"bba-a-b-\"");
  EXPECT_EQ(eval("'héllo'.substring(1, 3)"), "\"él\"");
  EXPECT_EQ(eval("'abc'.substring(2, 1)"), "error: invalid substring range. start: 2, end: 1");
  EXPECT_EQ(eval("' \\u00a0 x \\t'.trim()"), "\"x\"");
  EXPECT_EQ(eval("['a', 'b'].join('-') + ['c'].join()"), "\"a-bc\"");
  EXPECT_EQ(eval("strings.quote('a\"\\n')"), "\"\\\"a\\\\\\\"\\\\n\\\"\"");
  EXPECT_EQ(eval("'MiXeD'.lowerAscii() + 'MiXeD'.upperAscii()"), "\"mixedMIXED\"");
}

TEST(CelLibraries, FormatWritesEachClause) {
  EXPECT_EQ(eval("'%s=%d (%.2f, %e) %x %X %o %b %%'.format(['n', -3, 2.5, 1000.0, 255, "
                 "'hi', 8, 5])"),
            "\"n=-3 (2.50, 1.000000e+03) ff 6869 10 101 %\"");
  EXPECT_EQ(eval("'%s %s'.format([[1, 'a'], {'k': 1.5}])"),
            "\"[1, \\\"a\\\"] {\\\"k\\\":1.500000}\"");
  EXPECT_EQ(eval("'%d'.format(['x'])"),
            "error: error during formatting: decimal clause can only be used on integers, was "
            "given string");
  EXPECT_EQ(eval("'%s %s'.format([1])"), "error: index 1 out of range");
  EXPECT_EQ(eval("'%z'.format([1])"),
            "error: could not parse formatting clause: unrecognized formatting clause \"z\"");
}

TEST(CelLibraries, ListsAndSets) {
  EXPECT_EQ(eval("[[1, 2, 2].isSorted(), ['b', 'a'].isSorted(), [].isSorted()]"),
            "[true, false, true]");
  EXPECT_EQ(eval("[[1, 2].sum(), [1.5, 2.0].sum(), [].sum()]"), "[3, 3.5, 0]");
  EXPECT_EQ(eval("[duration('1m'), duration('1s')].sum()"), "duration(\"61s\")");
  EXPECT_EQ(eval("[[3, 1, 2].min(), [3, 1, 2].max(), ['b', 'a'].min()]"), "[1, 3, \"a\"]");
  EXPECT_EQ(eval("[].max()"), "error: max called on empty list");
  EXPECT_EQ(eval("[[1, 2, 2].indexOf(2), [1, 2, 2].lastIndexOf(2), [1].indexOf(5)]"),
            "[1, 2, -1]");
  EXPECT_EQ(eval("[sets.contains([1, 2], [2.0]), sets.equivalent([1, 1], [1]), "
                 "sets.intersects([1], [2])]"),
            "[true, true, false]");
}

TEST(CelLibraries, RegexFindsWithRe2) {
  EXPECT_EQ(eval("'abc 123 def 456'.find('[0-9]+')"), "\"123\"");
  EXPECT_EQ(eval("'abc'.find('[0-9]+')"), "\"\"");
  EXPECT_EQ(eval("'a1b22c333'.findAll('[0-9]+')"), "[\"1\", \"22\", \"333\"]");
  EXPECT_EQ(eval("'a1b22c333'.findAll('[0-9]+', 2)"), "[\"1\", \"22\"]");
  EXPECT_EQ(eval("'abc'.findAll('')"), "[\"\", \"\", \"\", \"\"]");
  EXPECT_EQ(eval("'abc'.find('(')").substr(0, 29), "error: given regex is invalid");
  // RE2 has no backtracking: a pattern that is exponential elsewhere is linear here.
  EXPECT_EQ(eval("'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!'.matches('^(a+)+$')"), "false");
}

// Patterns may come from objects, so the shared cache must not let one writer pin unbounded
// memory: large programs are not kept, and the number of kept patterns is capped.
TEST(CelLibraries, PatternCacheKeepsOnlyABoundedSetOfSmallPrograms) {
  std::string error;
  const auto small = compiled_pattern("^[a-z]+$", error);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(compiled_pattern("^[a-z]+$", error), small);

  const auto large = compiled_pattern("\\pL{300}", error);
  ASSERT_NE(large, nullptr) << error;
  EXPECT_NE(compiled_pattern("\\pL{300}", error), large);

  for (int i = 0; i < 300; ++i) {
    ASSERT_NE(compiled_pattern("^x" + std::to_string(i) + "$", error), nullptr);
  }
  EXPECT_NE(compiled_pattern("^[a-z]+$", error), small);
  EXPECT_EQ(eval("'abc'.matches('\\\\pL{300}')"), "false");
}

TEST(CelLibraries, MathAndEncoders) {
  EXPECT_EQ(eval("[math.greatest(1, 2.5, 2u), math.least([3, -1]), math.greatest(7)]"),
            "[2.5, -1, 7]");
  EXPECT_EQ(eval("math.least([])"), "error: math.@min(list) argument must not be empty");
  EXPECT_EQ(eval("[math.round(2.5), math.round(-2.5), math.trunc(-1.7), math.ceil(1.1)]"),
            "[3.0, -3.0, -1.0, 2.0]");
  EXPECT_EQ(eval("math.abs(-9223372036854775808)"), "error: integer overflow");
  EXPECT_EQ(eval("[math.bitShiftRight(-1, 60), math.bitShiftLeft(1, 64), math.bitNot(0u)]"),
            "[15, 0, 18446744073709551615u]");
  EXPECT_EQ(eval("[math.sign(-3.0), math.isNaN(0.0 / 0.0), math.sqrt(16)]"),
            "[-1.0, true, 4.0]");
  EXPECT_EQ(eval("base64.encode(b'hello') + string(base64.decode('aGk='))"), "\"aGVsbG8=hi\"");
  EXPECT_EQ(eval("base64.decode('!!')").substr(0, 25), "error: illegal base64 dat");
}

TEST(CelLibraries, IpAndCidrAsKubeParsesThem) {
  EXPECT_EQ(eval("string(ip('2001:DB8:0:0:1:0:0:1'))"), "\"2001:db8::1:0:0:1\"");
  EXPECT_EQ(eval("string(ip('2001:db8:0:0:0:0:2:1'))"), "\"2001:db8::2:1\"");
  EXPECT_EQ(eval("[ip.isCanonical('2001:db8::1'), ip.isCanonical('2001:DB8::1')]"),
            "[true, false]");
  EXPECT_EQ(eval("[isIP('1.2.3.4'), isIP('01.2.3.4'), isIP('1.2.3'), isIP('::1'), "
                 "isIP('fe80::1%eth0'), isIP('::ffff:1.2.3.4')]"),
            "[true, false, false, true, false, false]");
  EXPECT_EQ(eval("ip('::ffff:1.2.3.4')"),
            "error: IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed");
  EXPECT_EQ(eval("[ip('10.0.0.1').family(), ip('::1').family(), ip('::1').isLoopback(), "
                 "ip('fe80::1').isLinkLocalUnicast(), ip('ff02::1').isLinkLocalMulticast(), "
                 "ip('255.255.255.255').isGlobalUnicast(), ip('10.1.2.3').isGlobalUnicast()]"),
            "[4, 6, true, true, true, false, true]");
  EXPECT_EQ(eval("type(ip('1.2.3.4')) == net.IP && ip('1.2.3.4') == ip('1.2.3.4')"), "true");
  EXPECT_EQ(eval("[cidr('10.0.0.0/8').containsIP('10.2.3.4'), "
                 "cidr('10.0.0.0/8').containsIP(ip('11.0.0.1')), "
                 "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16'), "
                 "cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8')), "
                 "cidr('::/0').containsIP('1.2.3.4')]"),
            "[true, false, true, false, false]");
  EXPECT_EQ(eval("[string(cidr('192.168.1.5/24').masked()), string(cidr('192.168.1.5/24').ip()), "
                 "string(cidr('2001:db8::/32').prefixLength())]"),
            "[\"192.168.1.0/24\", \"192.168.1.5\", \"32\"]");
  EXPECT_EQ(eval("[isCIDR('10.0.0.0/33'), isCIDR('10.0.0.0/08'), isCIDR('10.0.0.0')]"),
            "[false, false, false]");
  EXPECT_EQ(eval("cidr('1.2.3.4/24') == cidr('1.2.3.0/24')"), "false");
}

TEST(CelLibraries, QuantitiesCompareExactlyAsKubeParsesThem) {
  EXPECT_EQ(eval("[quantity('200M').compareTo(quantity('0.2G')), "
                 "quantity('50M').compareTo(quantity('50Mi')), "
                 "quantity('1.5Gi').compareTo(quantity('1536Mi'))]"),
            "[0, -1, 0]");
  EXPECT_EQ(eval("quantity('150Mi').isGreaterThan(quantity('100Mi')) && "
                 "quantity('50M').isLessThan(quantity('100M'))"),
            "true");
  EXPECT_EQ(eval("[quantity('1000m').asInteger(), quantity('5').sub(7).sign(), "
                 "quantity('1Gi').add(quantity('1Mi')).compareTo(quantity('1025Mi'))]"),
            "[1, -1, 0]");
  EXPECT_EQ(eval("quantity('1.5').asInteger()"), "error: cannot convert value to integer");
  EXPECT_EQ(eval("quantity('9223372036854775808').isInteger()"), "false");
  EXPECT_EQ(eval("quantity('100m').asApproximateFloat()"), "0.1");
  // Finer than nano rounds up.
  EXPECT_EQ(eval("quantity('0.1n') == quantity('1n') && quantity('2e3') == quantity('2k')"),
            "true");
  EXPECT_EQ(eval("[isQuantity('1Ki'), isQuantity('+5m'), isQuantity('1K'), isQuantity('1 Gi'), "
                 "isQuantity('')]"),
            "[true, true, false, false, false]");
  EXPECT_EQ(eval("quantity('1K')"), "error: unable to parse quantity's suffix");
  EXPECT_EQ(eval("quantity('1 Gi')"),
            "error: quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
}

TEST(CelLibraries, SemanticVersionsOrderAsSemverSays) {
  EXPECT_EQ(eval("[semver('1.2.3').compareTo(semver('1.2.3')), "
                 "semver('1.2.3').compareTo(semver('2.0.0')), semver('1.10.0').compareTo(semver('1.9.9'))]"),
            "[0, -1, 1]");
  // Pre-releases: before their release, numeric identifiers by value and before words.
  EXPECT_EQ(eval("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1')) && "
                 "semver('1.0.0-alpha.beta').isLessThan(semver('1.0.0-beta')) && "
                 "semver('1.0.0-2').isLessThan(semver('1.0.0-11')) && "
                 "semver('1.0.0-11').isLessThan(semver('1.0.0-a')) && "
                 "semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))"),
            "true");
  EXPECT_EQ(eval("semver('1.2.3+build.5') == semver('1.2.3')"), "true");
  EXPECT_EQ(eval("[semver('v1.2', true).minor(), semver('v01.02', true).patch()]"), "[2, 0]");
  EXPECT_EQ(eval("semver('01.2.3')"),
            "error: Major number must not contain leading zeroes \"01\"");
  EXPECT_EQ(eval("semver('1.2')"), "error: No Major.Minor.Patch elements found");
  EXPECT_EQ(eval("semver('1.2-rc', true)"),
            "error: short version cannot contain PreRelease/Build meta data");
  EXPECT_EQ(eval("[isSemver('1.2.3-'), isSemver('1.2.3-01'), isSemver('1.2', true)]"),
            "[false, false, true]");
  // Quantities and versions have methods of the same names.
  EXPECT_EQ(eval("quantity('1').compareTo(quantity('2')) + semver('2.0.0').compareTo(semver('1.0.0'))"),
            "0");
}

TEST(CelLibraries, NamedFormatsValidateWithKubesMessages) {
  EXPECT_EQ(eval("format.named('dns1123Label').value().validate('my-name')"), "optional.none()");
  EXPECT_EQ(eval("format.named('nope')"), "optional.none()");
  EXPECT_EQ(eval("format.dns1123Label().validate('My_Name').value()[0]").substr(0, 52),
            "\"a lowercase RFC 1123 label must consist of lower ca");
  // A prefix may end in '-', as a generateName does.
  EXPECT_EQ(eval("[format.dns1123LabelPrefix().validate('my-prefix-').hasValue(), "
                 "format.dns1123Label().validate('my-prefix-').hasValue()]"),
            "[false, true]");
  EXPECT_EQ(eval("format.dns1035Label().validate('1abc').hasValue() && "
                 "!format.qualifiedName().validate('example.com/name').hasValue() && "
                 "format.labelValue().validate('-x').hasValue()"),
            "true");
  EXPECT_EQ(eval("[format.uuid().validate('123e4567-e89b-12d3-a456-426614174000'), "
                 "format.byte().validate('aGk='), format.date().validate('2021-02-30'), "
                 "format.datetime().validate('2021-01-01T00:00:00Z'), "
                 "format.uri().validate('http://example.com/a')]"),
            "[optional.none(), optional.none(), optional.of([\"invalid date\"]), "
            "optional.none(), optional.none()]");
  EXPECT_EQ(eval("format.uri().validate('not a uri')"),
            "optional.of([\"parse \\\"not a uri\\\": invalid URI for request\"])");
}

TEST(CelLibraries, UrlsParseAsGoParsesRequestUris) {
  EXPECT_EQ(eval("url('https://example.com:80/path?a=1&a=2&b=x+y#frag').getQuery()"),
            "{\"a\": [\"1\", \"2\"], \"b\": [\"x y\"]}");
  EXPECT_EQ(eval("[url('https://example.com:80/p').getHost(), url('https://example.com:80/p').getPort(), "
                 "url('https://[::1]:8443/p').getHostname(), url('HTTPS://example.com').getScheme(), "
                 "url('https://example.com/a%20b').getEscapedPath(), url('/abs?q=1').getScheme()]"),
            "[\"example.com:80\", \"80\", \"::1\", \"https\", \"/a%20b\", \"\"]");
  EXPECT_EQ(eval("[isURL('https://example.com'), isURL('/path'), isURL('example.com'), isURL(''), "
                 "isURL('mailto:a@b.c'), isURL('http://a/\\x01')]"),
            "[true, true, false, false, true, false]");
  EXPECT_EQ(eval("url('http://a.com:x/')"),
            "error: URL parse error during conversion from string: parse \"http://a.com:x/\": "
            "invalid port \":x\" after host");
  EXPECT_EQ(eval("url('http://a/%zz')"),
            "error: URL parse error during conversion from string: parse \"http://a/%zz\": "
            "invalid URL escape \"%zz\"");
}

}  // namespace
}  // namespace kwatch::cel
