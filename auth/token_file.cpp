#include "auth/token_file.hpp"

#include <cctype>
#include <fstream>
#include <sstream>
#include <vector>

namespace kwatch::auth {

namespace {

using Outcome = boost::system::result<std::shared_ptr<const TokenFile>, std::string>;

Outcome failure(std::string message) {
  return Outcome(boost::system::in_place_error, std::move(message));
}

// One CSV record as Go's encoding/csv reads it with TrimLeadingSpace: fields split at commas,
// a field that starts with '"' runs to the closing quote ("" is a quote) and may span commas.
// Records end at a newline outside quotes. Returns false at the end of the text.
bool next_record(std::string_view text, std::size_t& pos, std::vector<std::string>& fields,
                 std::string& error) {
  fields.clear();
  if (pos >= text.size()) return false;
  std::string field;
  bool at_field_start = true;
  for (;;) {
    if (at_field_start) {
      while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
      at_field_start = false;
      if (pos < text.size() && text[pos] == '"') {
        ++pos;
        for (;;) {
          if (pos >= text.size()) {
            error = "extraneous or missing \" in quoted-field";
            return true;
          }
          if (text[pos] == '"') {
            if (pos + 1 < text.size() && text[pos + 1] == '"') {
              field.push_back('"');
              pos += 2;
              continue;
            }
            ++pos;
            break;
          }
          field.push_back(text[pos++]);
        }
      }
    }
    if (pos >= text.size() || text[pos] == '\n') {
      if (!field.empty() && field.back() == '\r') field.pop_back();
      fields.push_back(std::move(field));
      if (pos < text.size()) ++pos;
      return true;
    }
    if (text[pos] == ',') {
      fields.push_back(std::move(field));
      field.clear();
      at_field_start = true;
      ++pos;
      continue;
    }
    field.push_back(text[pos++]);
  }
}

}  // namespace

Outcome TokenFile::parse(std::string_view text, const std::string& path) {
  auto file = std::make_shared<TokenFile>();
  std::size_t pos = 0;
  std::vector<std::string> fields;
  std::string error;
  for (std::size_t record = 1; next_record(text, pos, fields, error); ++record) {
    if (!error.empty()) {
      return failure("token file '" + path + "', record " + std::to_string(record) + ": " + error);
    }
    // Blank lines are skipped, as encoding/csv skips them.
    if (fields.size() == 1 && fields[0].empty()) continue;
    if (fields.size() < 3) {
      return failure("token file '" + path + "' must have at least 3 columns (token, user name, "
                     "user uid), found " + std::to_string(fields.size()));
    }
    if (fields[0].empty()) continue;  // kube ignores records without a token
    auth::UserInfo user;
    user.name = fields[1];
    user.uid = fields[2];
    if (fields.size() >= 4 && !fields[3].empty()) {
      std::stringstream groups(fields[3]);
      for (std::string g; std::getline(groups, g, ',');) {
        if (!g.empty()) user.groups.push_back(g);
      }
    }
    file->users_.emplace(fields[0], std::move(user));
  }
  return std::shared_ptr<const TokenFile>(std::move(file));
}

Outcome TokenFile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return failure("cannot read token file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

std::optional<auth::UserInfo> TokenFile::authenticate(std::string_view token) const {
  auto it = users_.find(token);
  if (it == users_.end()) return std::nullopt;
  auth::UserInfo user = it->second;
  user.groups.push_back("system:authenticated");
  return user;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return std::nullopt;
  }
  if (authorization[kScheme.size()] != ' ') return std::nullopt;
  std::string_view token = authorization.substr(kScheme.size() + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\r')) token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  return token;
}

}  // namespace kwatch::auth
