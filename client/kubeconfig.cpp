#include "client/kubeconfig.hpp"

#include "base/base64.hpp"
#include "base/yaml_subset.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace kwatch::client {

namespace {

using base::YamlNode;

// A named entry (cluster, user or context) and the directory of the file it came from.
struct Named {
  const YamlNode* body = nullptr;
  std::string base_dir;
};

struct Merged {
  std::deque<YamlNode> documents;  // owns what the entries point into (a deque: never moved)
  std::map<std::string, Named> clusters, users, contexts;
  std::string current_context;
};

// The file's bytes into `out`; an error message, or "".
std::string read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot read " + path + ": " + std::strerror(errno);
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return "";
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return base_dir + "/" + path;
}

std::string scalar(const YamlNode* node, std::string_view key) {
  const YamlNode* v = node != nullptr ? node->find(key) : nullptr;
  return v != nullptr && v->kind == YamlNode::Kind::scalar && !v->is_null() ? v->scalar : "";
}

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// Adds a file's `clusters`, `users` and `contexts` (name -> the entry's inner mapping) where the
// name is not taken yet.
std::string merge(Merged& merged, const YamlNode& doc, const std::string& base_dir,
                  const std::string& source) {
  if (doc.kind != YamlNode::Kind::mapping) {
    return doc.is_null() ? "" : source + ": not a kubeconfig (expected a mapping)";
  }
  static constexpr std::pair<std::string_view, std::string_view> kLists[] = {
      {"clusters", "cluster"}, {"users", "user"}, {"contexts", "context"}};
  for (const auto& [list, inner] : kLists) {
    const YamlNode* items = doc.find(list);
    if (items == nullptr || items->is_null()) continue;
    if (items->kind != YamlNode::Kind::sequence) {
      return source + ": line " + std::to_string(items->line) + ": " + std::string(list) +
             " must be a list";
    }
    auto& into = list == "clusters" ? merged.clusters : list == "users" ? merged.users : merged.contexts;
    for (const YamlNode& item : items->items) {
      const std::string name = scalar(&item, "name");
      const YamlNode* body = item.find(inner);
      if (name.empty() || body == nullptr || body->kind != YamlNode::Kind::mapping) {
        return source + ": line " + std::to_string(item.line) + ": an entry of " +
               std::string(list) + " needs a name and a " + std::string(inner) + " mapping";
      }
      into.try_emplace(name, Named{body, base_dir});
    }
  }
  if (merged.current_context.empty()) merged.current_context = scalar(&doc, "current-context");
  return "";
}

// Bytes from `<key>-data` (base64) or the file `<key>` into `out` ("" when neither is set); an
// error message, or "".
std::string material(const Named& entry, const std::string& key, const std::string& what,
                     std::string& out) {
  out.clear();
  if (const std::string data = scalar(entry.body, key + "-data"); !data.empty()) {
    auto decoded = base::base64_decode(data);
    if (!decoded) return what + ": " + key + "-data is not valid base64";
    out = std::move(*decoded);
    return "";
  }
  if (const std::string file = scalar(entry.body, key); !file.empty()) {
    if (auto err = read_file(resolve(entry.base_dir, file), out); !err.empty()) return what + ": " + err;
  }
  return "";
}

ConfigResult resolve_context(const Merged& merged, const std::string& wanted) {
  const std::string name = wanted.empty() ? merged.current_context : wanted;
  if (name.empty()) return std::string("no context: the kubeconfig sets no current-context");
  auto ctx = merged.contexts.find(name);
  if (ctx == merged.contexts.end()) return "context \"" + name + "\" is not in the kubeconfig";
  ClientConfig out;
  out.context = name;
  out.cluster = scalar(ctx->second.body, "cluster");
  out.user = scalar(ctx->second.body, "user");
  if (const std::string ns = scalar(ctx->second.body, "namespace"); !ns.empty()) out.ns = ns;

  auto cluster = merged.clusters.find(out.cluster);
  if (cluster == merged.clusters.end()) {
    return "context \"" + name + "\" names cluster \"" + out.cluster + "\", which is not in the kubeconfig";
  }
  const std::string cluster_what = "cluster \"" + out.cluster + "\"";
  out.server = scalar(cluster->second.body, "server");
  if (out.server.empty()) return cluster_what + " has no server";
  if (!out.server.starts_with("https://") && !out.server.starts_with("http://")) {
    return cluster_what + ": server \"" + out.server + "\" is not an http(s):// URL";
  }
  if (!scalar(cluster->second.body, "proxy-url").empty()) {
    return cluster_what + ": proxy-url is not supported";
  }
  out.tls_server_name = scalar(cluster->second.body, "tls-server-name");
  out.insecure_skip_tls_verify = scalar(cluster->second.body, "insecure-skip-tls-verify") == "true";
  if (auto err = material(cluster->second, "certificate-authority", cluster_what, out.ca_pem);
      !err.empty()) {
    return err;
  }

  if (out.user.empty()) return out;  // no credentials: anonymous
  auto user = merged.users.find(out.user);
  if (user == merged.users.end()) {
    return "context \"" + name + "\" names user \"" + out.user + "\", which is not in the kubeconfig";
  }
  const std::string user_what = "user \"" + out.user + "\"";
  for (const char* unsupported : {"exec", "auth-provider", "as", "as-groups", "as-uid"}) {
    if (const YamlNode* v = user->second.body->find(unsupported); v != nullptr && !v->is_null()) {
      return user_what + ": " + unsupported + " is not supported by kwatch's client";
    }
  }
  if (auto err = material(user->second, "client-certificate", user_what, out.client_cert_pem);
      !err.empty()) {
    return err;
  }
  if (auto err = material(user->second, "client-key", user_what, out.client_key_pem); !err.empty()) {
    return err;
  }
  if (out.client_cert_pem.empty() != out.client_key_pem.empty()) {
    return user_what + ": a client certificate needs its key, and a key its certificate";
  }
  out.token = scalar(user->second.body, "token");
  if (const std::string file = scalar(user->second.body, "tokenFile"); !file.empty() && out.token.empty()) {
    out.token_file = resolve(user->second.base_dir, file);
    std::string token;
    if (auto err = read_file(out.token_file, token); !err.empty()) return user_what + ": " + err;
    out.token = trim(std::move(token));
  }
  out.username = scalar(user->second.body, "username");
  out.password = scalar(user->second.body, "password");
  return out;
}

std::string add_text(Merged& merged, std::string_view text, const std::string& base_dir,
                     const std::string& source) {
  auto doc = base::parse_yaml_subset(text);
  if (!doc) return source + ": " + doc.error();
  merged.documents.push_back(std::move(*doc));
  return merge(merged, merged.documents.back(), base_dir, source);
}

}  // namespace

ConfigResult parse_kubeconfig(std::string_view text, const std::string& base_dir,
                              const std::string& context) {
  Merged merged;
  if (auto err = add_text(merged, text, base_dir, "kubeconfig"); !err.empty()) return err;
  return resolve_context(merged, context);
}

ConfigResult load_kubeconfig(const std::vector<std::string>& files, const std::string& context) {
  if (files.empty()) return std::string("no kubeconfig file given");
  Merged merged;
  for (const auto& file : files) {
    std::string text;
    if (auto err = read_file(file, text); !err.empty()) return err;
    if (auto err = add_text(merged, text, directory_of(file), file); !err.empty()) return err;
  }
  return resolve_context(merged, context);
}

ConfigResult load_default_kubeconfig(const std::string& context) {
  std::vector<std::string> files;
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string_view list = env;
    while (!list.empty()) {
      const auto colon = list.find(':');
      const std::string item(list.substr(0, colon));
      // As client-go: files of the list that do not exist are skipped.
      if (!item.empty() && std::filesystem::exists(item)) files.push_back(item);
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    files.push_back(std::string(home) + "/.kube/config");
  }
  return load_kubeconfig(files, context);
}

}  // namespace kwatch::client
