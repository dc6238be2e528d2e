#include "apimachinery/validation.hpp"

#include <cstdio>

namespace kwatch::apimachinery {
namespace {

constexpr std::size_t kDns1123LabelMaxLength = 63;
constexpr std::size_t kDns1123SubdomainMaxLength = 253;
constexpr std::size_t kQualifiedNameMaxLength = 63;
constexpr std::size_t kLabelValueMaxLength = 63;

constexpr std::string_view kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kDns1123LabelErrMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character";
constexpr std::string_view kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr std::string_view kDns1123SubdomainErrMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";
constexpr std::string_view kQualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr std::string_view kQualifiedNameErrMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr std::string_view kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr std::string_view kLabelValueErrMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character";

std::string max_len_error(std::size_t n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

// RegexError of validation.go: "<msg> (e.g. 'a' or 'b', regex used for validation is '<fmt>')".
std::string regex_error(std::string_view msg, std::string_view fmt,
                        std::initializer_list<std::string_view> examples) {
  std::string out(msg);
  if (examples.size() == 0) {
    out += " (regex used for validation is '";
  } else {
    out += " (e.g. ";
    bool first = true;
    for (auto e : examples) {
      if (!first) out += " or ";
      first = false;
      out += '\'';
      out += e;
      out += "', ";
    }
    out += "regex used for validation is '";
  }
  out += fmt;
  out += "')";
  return out;
}

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) {
  return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

// [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool matches_dns1123_label(std::string_view s) {
  if (s.empty() || !is_lower_alnum(s.front()) || !is_lower_alnum(s.back())) return false;
  for (char c : s) {
    if (!is_lower_alnum(c) && c != '-') return false;
  }
  return true;
}

bool matches_dns1123_subdomain(std::string_view s) {
  std::size_t start = 0;
  while (true) {
    auto dot = s.find('.', start);
    auto part = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!matches_dns1123_label(part)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool matches_qualified_name(std::string_view s) {
  if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  for (char c : s) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> dns1123_label_errors(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(max_len_error(kDns1123LabelMaxLength));
  if (!matches_dns1123_label(value)) {
    if (matches_dns1123_subdomain(value)) {
      errs.emplace_back("must not contain dots");
    } else {
      errs.push_back(regex_error(kDns1123LabelErrMsg, kDns1123LabelFmt, {"my-name", "123-abc"}));
    }
  }
  return errs;
}

std::vector<std::string> dns1035_label_errors(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(max_len_error(kDns1123LabelMaxLength));
  auto lower_alpha = [](char c) { return c >= 'a' && c <= 'z'; };
  auto lower_alnum = [&](char c) { return lower_alpha(c) || (c >= '0' && c <= '9'); };
  bool ok = !value.empty() && lower_alpha(value.front()) && lower_alnum(value.back());
  for (char c : value) ok = ok && (lower_alnum(c) || c == '-');
  if (!ok) {
    errs.emplace_back(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
  }
  return errs;
}

std::vector<std::string> dns1123_subdomain_errors(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123SubdomainMaxLength) {
    errs.push_back(max_len_error(kDns1123SubdomainMaxLength));
  }
  if (!matches_dns1123_subdomain(value)) {
    errs.push_back(regex_error(kDns1123SubdomainErrMsg, kDns1123SubdomainFmt, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> qualified_name_errors(std::string_view value) {
  std::vector<std::string> errs;
  std::string_view name = value;
  auto slash = value.find('/');
  if (slash != std::string_view::npos) {
    if (value.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back("a qualified name " +
                     regex_error(kQualifiedNameErrMsg, kQualifiedNameFmt,
                                 {"MyName", "my.name", "123-abc"}) +
                     " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return errs;
    }
    auto prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.emplace_back("prefix part must be non-empty");
    } else {
      for (auto& m : dns1123_subdomain_errors(prefix)) errs.push_back("prefix part " + m);
    }
  }
  if (name.empty()) {
    errs.emplace_back("name part must be non-empty");
  } else if (name.size() > kQualifiedNameMaxLength) {
    errs.push_back("name part " + max_len_error(kQualifiedNameMaxLength));
  }
  if (!matches_qualified_name(name)) {
    errs.push_back("name part " + regex_error(kQualifiedNameErrMsg, kQualifiedNameFmt,
                                              {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> label_value_errors(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxLength) errs.push_back(max_len_error(kLabelValueMaxLength));
  if (!value.empty() && !matches_qualified_name(value)) {
    errs.push_back(
        regex_error(kLabelValueErrMsg, kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

std::string go_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\v': out += "\\v"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          // Bytes >= 0x80 are passed through: valid UTF-8 prints as itself in Go too.
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string field_invalid_message(std::string_view field, std::string_view value,
                                  std::string_view detail) {
  std::string out(field);
  out += ": Invalid value: ";
  out += go_quote(value);
  if (!detail.empty()) {
    out += ": ";
    out += detail;
  }
  return out;
}

std::vector<std::string> path_segment_errors(std::string_view value) {
  // kube's path.IsValidPathSegmentName, word for word in its messages.
  if (value == "." || value == "..") return {"may not be '" + std::string(value) + "'"};
  std::vector<std::string> errors;
  if (value.find('/') != std::string_view::npos) errors.emplace_back("may not contain '/'");
  if (value.find('%') != std::string_view::npos) errors.emplace_back("may not contain '%'");
  return errors;
}

std::string_view trim_space(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

bool has_line_break(std::string_view s) {
  return s.find('\n') != std::string_view::npos || s.find('\r') != std::string_view::npos;
}

}  // namespace kwatch::apimachinery
