#include "cel/escaping.hpp"

#include <algorithm>
#include <iterator>

namespace kwatch::cel {

std::optional<std::string> escape_property_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return std::nullopt;
  // The language's keywords and reserved words (`namespace` among them: a common field name).
  constexpr std::string_view kReserved[] = {
      "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
      "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void",
      "while"};
  if (std::find(std::begin(kReserved), std::end(kReserved), name) != std::end(kReserved)) {
    return "__" + std::string(name) + "__";
  }
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '_' && i + 1 < name.size() && name[i + 1] == '_') {
      out += "__underscores__";
      ++i;
    } else if (c == '.') {
      out += "__dot__";
    } else if (c == '-') {
      out += "__dash__";
    } else if (c == '/') {
      out += "__slash__";
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_') {
      out += c;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace kwatch::cel
