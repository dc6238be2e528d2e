#include "server/audit_log.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kwatch::server {

namespace json = boost::json;
namespace fs = std::filesystem;
using std::chrono::system_clock;

namespace {

// kube's MicroTime: RFC 3339 in UTC with microseconds.
std::string micro_time(system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  long frac = static_cast<long>(us % 1'000'000);
  if (frac < 0) {
    frac += 1'000'000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06ldZ", frac);
  return buf;
}

// lumberjack's backup time format, "2006-01-02T15-04-05.000", in UTC.
std::string backup_time(system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H-%M-%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03d", static_cast<int>(ms % 1000));
  return buf;
}

// The inverse, for cleaning up: false if `text` is not such a time.
bool parse_backup_time(const std::string& text, system_clock::time_point& out) {
  std::tm tm{};
  int ms = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d-%2d-%2d.%3d%c", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &tail) != 7 ||
      text.size() != 23) {
    return false;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t secs = timegm(&tm);
  out = system_clock::from_time_t(secs) + std::chrono::milliseconds(ms);
  return true;
}

std::string lowercase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string audit_line(const AuditEvent& e, AuditEvent::Stage stage) {
  using apimachinery::to_valid_utf8;
  json::object o;
  o["kind"] = "Event";
  o["apiVersion"] = "audit.k8s.io/v1";
  o["level"] = "Metadata";
  o["auditID"] = e.audit_id;
  o["stage"] = stage == AuditEvent::Stage::response_started ? "ResponseStarted" : "ResponseComplete";
  o["requestURI"] = to_valid_utf8(e.request_uri);
  o["verb"] = e.resource_request ? e.attributes.verb : lowercase(e.method);
  auto user_info = [](const auth::UserInfo& u) {
    json::object user;
    user["username"] = to_valid_utf8(u.name);
    if (!u.uid.empty()) user["uid"] = to_valid_utf8(u.uid);
    if (!u.groups.empty()) {
      json::array groups;
      for (const auto& g : u.groups) groups.emplace_back(to_valid_utf8(g));
      user["groups"] = std::move(groups);
    }
    if (!u.extra.empty()) {
      json::object extra;
      for (const auto& [key, values] : u.extra) {
        json::array list;
        for (const auto& v : values) list.emplace_back(to_valid_utf8(v));
        extra[to_valid_utf8(key)] = std::move(list);
      }
      user["extra"] = std::move(extra);
    }
    return user;
  };
  o["user"] = user_info(e.user);
  if (e.impersonated_user) o["impersonatedUser"] = user_info(*e.impersonated_user);
  json::array ips;
  if (!e.source_ip.empty()) ips.emplace_back(e.source_ip);
  o["sourceIPs"] = std::move(ips);
  if (!e.user_agent.empty()) o["userAgent"] = to_valid_utf8(e.user_agent);
  if (e.resource_request) {
    const auto& a = e.attributes;
    json::object ref;
    ref["resource"] = a.resource;
    if (!a.namespace_.empty()) ref["namespace"] = to_valid_utf8(a.namespace_);
    if (!a.name.empty()) ref["name"] = to_valid_utf8(a.name);
    if (!a.api_group.empty()) ref["apiGroup"] = a.api_group;
    if (!e.api_version.empty()) ref["apiVersion"] = e.api_version;
    if (!a.subresource.empty()) ref["subresource"] = a.subresource;
    o["objectRef"] = std::move(ref);
  }
  json::object status{{"metadata", json::object()}};
  if (!e.status.empty()) status["status"] = e.status;
  if (!e.message.empty()) status["message"] = to_valid_utf8(e.message);
  if (!e.reason.empty()) status["reason"] = e.reason;
  status["code"] = e.code;
  o["responseStatus"] = std::move(status);
  o["requestReceivedTimestamp"] = micro_time(e.received);
  o["stageTimestamp"] = micro_time(e.stage_time);
  if (!e.decision.empty() || !e.annotations.empty()) {
    json::object annotations;
    if (!e.decision.empty()) annotations["authorization.k8s.io/decision"] = e.decision;
    for (const auto& [key, value] : e.annotations) annotations[key] = value;
    o["annotations"] = std::move(annotations);
  }
  std::string line = json::serialize(o);
  line += '\n';
  return line;
}

// The file and its rotation. Writer thread only.
struct AuditLog::File {
  AuditLogOptions options;
  int fd = -1;
  bool owned = false;  // not standard output
  std::uint64_t size = 0;

  ~File() {
    if (owned && fd >= 0) ::close(fd);
  }

  std::string open_file() {
    fd = ::open(options.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return options.path + ": cannot open the audit log: " + std::strerror(errno);
    owned = true;
    struct stat st {};
    if (::fstat(fd, &st) == 0) {
      size = static_cast<std::uint64_t>(st.st_size);
      if ((st.st_mode & 077) != 0) {
        spdlog::warn("the audit log {} is open to group or others (mode {:o}); kwatch creates "
                     "its files 0600",
                     options.path, st.st_mode & 0777);
      }
    }
    return "";
  }

  std::string open() {
    if (options.path == "-") {
      fd = STDOUT_FILENO;
      return "";
    }
    const fs::path dir = fs::path(options.path).parent_path();
    std::error_code ec;
    if (!dir.empty() && !fs::exists(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) return options.path + ": cannot create its directory: " + ec.message();
      fs::permissions(dir, fs::perms::owner_all, ec);
    }
    return open_file();
  }

  // Whether appending `bytes` more would take the file past its size limit.
  bool full_after(std::size_t bytes) const {
    return owned && options.max_size_bytes > 0 && size + bytes > options.max_size_bytes;
  }

  // Appends whole lines, rotating first if they do not fit (a line larger than the limit gets
  // a file of its own); false on an I/O error.
  bool write(const std::string& data) {
    if (size > 0 && full_after(data.size())) rotate();
    if (fd < 0) return false;
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    size += data.size();
    return true;
  }

  // lumberjack's names: "audit.log" -> "audit-<time>.log".
  void split_name(std::string& stem, std::string& ext) const {
    const fs::path p(options.path);
    ext = p.extension().string();
    stem = p.filename().string();
    stem.resize(stem.size() - ext.size());
  }

  void rotate() {
    ::close(fd);
    fd = -1;
    std::string stem, ext;
    split_name(stem, ext);
    const fs::path dir = fs::path(options.path).parent_path();
    auto t = system_clock::now();
    fs::path backup;
    std::error_code ec;
    do {  // two rotations within a millisecond must not overwrite each other
      backup = dir / (stem + "-" + backup_time(t) + ext);
      t += std::chrono::milliseconds(1);
    } while (fs::exists(backup, ec));
    fs::rename(options.path, backup, ec);
    if (ec) spdlog::error("cannot rotate the audit log {}: {}", options.path, ec.message());
    if (auto err = open_file(); !err.empty()) {
      spdlog::error("{}", err);
      return;
    }
    size = 0;
    remove_old_backups();
  }

  void remove_old_backups() {
    if (options.max_backups <= 0 && options.max_age_days <= 0) return;
    std::string stem, ext;
    split_name(stem, ext);
    fs::path dir = fs::path(options.path).parent_path();
    if (dir.empty()) dir = ".";
    std::vector<std::pair<system_clock::time_point, fs::path>> backups;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with(stem + "-") || !name.ends_with(ext) ||
          name.size() <= stem.size() + 1 + ext.size()) {
        continue;
      }
      system_clock::time_point when;
      if (!parse_backup_time(name.substr(stem.size() + 1, name.size() - stem.size() - 1 - ext.size()),
                             when)) {
        continue;
      }
      backups.emplace_back(when, entry.path());
    }
    std::sort(backups.begin(), backups.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const auto cutoff = system_clock::now() - std::chrono::hours(24) * options.max_age_days;
    for (std::size_t i = 0; i < backups.size(); ++i) {
      const bool too_many = options.max_backups > 0 && i >= static_cast<std::size_t>(options.max_backups);
      const bool too_old = options.max_age_days > 0 && backups[i].first < cutoff;
      if (too_many || too_old) fs::remove(backups[i].second, ec);
    }
  }
};

boost::system::result<std::shared_ptr<AuditLog>, std::string> AuditLog::open(AuditLogOptions options) {
  auto file = std::make_unique<File>();
  file->options = options;
  if (auto err = file->open(); !err.empty()) return err;
  return std::shared_ptr<AuditLog>(new AuditLog(std::move(options), std::move(file)));
}

AuditLog::AuditLog(AuditLogOptions options, std::unique_ptr<File> file)
    : options_(std::move(options)), file_(std::move(file)) {
  writer_ = std::thread([this] { run(); });
}

AuditLog::~AuditLog() { stop(); }

void AuditLog::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !writer_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (writer_.joinable()) writer_.join();
}

void AuditLog::count_dropped(std::uint64_t n, const char* why) {
  errors_.fetch_add(n, std::memory_order_relaxed);
  // At most one warning per 10 s, whatever the rate of drops.
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  auto last = last_warning_.load(std::memory_order_relaxed);
  if (now - last >= 10 && last_warning_.compare_exchange_strong(last, now)) {
    spdlog::warn("audit log {}: events lost ({}); {} lost so far (apiserver_audit_error_total)",
                 options_.path, why, errors());
  }
}

void AuditLog::record(AuditEvent event, AuditEvent::Stage stage) {
  events_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      // Shutting down (a watch ending after the writer stopped): counted, not warned about.
      errors_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (queue_.size() < options_.queue_capacity) {
      queue_.push_back(Item{std::move(event), stage});
      if (queue_.size() == 1) {
        // Only the first event of a batch wakes the writer; it takes everything queued by then.
        wake_.notify_one();
      }
      return;
    }
  }
  count_dropped(1, "the queue is full");
}

void AuditLog::run() {
  std::deque<Item> batch;
  std::string text;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything is written
      batch.swap(queue_);
    }
    // One write per batch, split where the file would pass its size limit, so that rotated
    // files stay within it however many events a batch holds.
    text.clear();
    std::size_t lines = 0;
    auto flush = [&] {
      if (!text.empty() && !file_->write(text)) {
        spdlog::error("audit log {}: write failed: {}", options_.path, std::strerror(errno));
        count_dropped(lines, "write error");
      }
      text.clear();
      lines = 0;
    };
    for (const auto& item : batch) {
      std::string line = audit_line(item.event, item.stage);
      if (!text.empty() && file_->full_after(text.size() + line.size())) flush();
      text += line;
      ++lines;
    }
    flush();
    batch.clear();
  }
}

namespace {

class Completion {
 public:
  Completion(std::shared_ptr<AuditLog> log, AuditEvent event)
      : log_(std::move(log)), event_(std::move(event)) {}
  ~Completion() {
    try {
      event_.stage_time = system_clock::now();
      log_->record(std::move(event_), AuditEvent::Stage::response_complete);
    } catch (...) {
      // Out of memory while logging: the event is lost, the connection goes on ending.
    }
  }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

 private:
  std::shared_ptr<AuditLog> log_;
  AuditEvent event_;
};

}  // namespace

std::shared_ptr<void> audit_on_completion(std::shared_ptr<AuditLog> log, AuditEvent event) {
  return std::make_shared<Completion>(std::move(log), std::move(event));
}

}  // namespace kwatch::server
