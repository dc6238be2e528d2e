// The audit log of --audit-log-path: one JSON line per request, in the shape of kube-apiserver's
// audit.k8s.io/v1 Event at level Metadata (who, what, from where, the outcome and the
// authorization decision; never a request or response body). Every request is logged at the
// ResponseComplete stage; watches also at ResponseStarted, when their stream begins. Each request
// gets an audit ID, which the response carries as its `Audit-Id` header, as kube's does.
//
// Writing never blocks the I/O threads: `record` queues the event (bounded, 10000 by default,
// kube's --audit-log-batch-buffer-size) for a writer thread that serializes and appends batches.
// When the queue is full the event is dropped, counted (apiserver_audit_error_total{plugin="log"})
// and warned about at most every 10 s. This is kube's "batch" mode; kube's default for the log
// backend, "blocking", makes each request wait for the disk, which kwatch does not do to the
// threads that serve everyone.
//
// Rotation as kube's (lumberjack): past --audit-log-maxsize megabytes the file is renamed to
// `<name>-<UTC time 2006-01-02T15-04-05.000>.<ext>` and a new one started; --audit-log-maxbackup
// rotated files are kept (0: all), none older than --audit-log-maxage days (0: no limit). Files
// are created 0600 (an existing file open to others is warned about, not chmod-ed). "-" writes
// to standard output, without rotation.
//
// Ownership: shared (the handler, main); `stop` (or destruction) drains the queue and joins the
// writer. Thread-safety: `record` and the counters from any thread.
#pragma once

#include "auth/rbac_authorizer.hpp"

#include <boost/system/result.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kwatch::server {

struct AuditEvent {
  enum class Stage { response_started, response_complete };
  std::string audit_id;
  std::string request_uri;
  std::string method;  // for non-resource requests the verb is the lowercase method, as in kube
  auth::UserInfo user;  // who authenticated
  // Who the request acted as (Impersonate-* headers), allowed or refused; nullopt when no one.
  std::optional<auth::UserInfo> impersonated_user;
  std::string source_ip;
  std::string user_agent;
  // A resource request: kube's verb (get list watch create update patch delete
  // deletecollection) and the objectRef fields.
  bool resource_request = false;
  auth::RequestAttributes attributes;
  std::string api_version;
  std::string decision;  // authorization.k8s.io/decision: "allow", "forbid", or "" (not reached)
  // More annotations (key, value): what the admission plugins recorded.
  std::vector<std::pair<std::string, std::string>> annotations;
  unsigned code = 0;
  // An error's Status fields (kube copies them into responseStatus at level Metadata).
  std::string status, reason, message;
  std::chrono::system_clock::time_point received;
  std::chrono::system_clock::time_point stage_time;
};

struct AuditLogOptions {
  std::string path;                  // "-": standard output
  std::uint64_t max_size_bytes = 0;  // rotate past this size (0: never)
  int max_backups = 0;               // rotated files kept (0: all)
  int max_age_days = 0;              // rotated files older than this are removed (0: never)
  std::size_t queue_capacity = 10000;
};

// One line (with its newline) for `event` at `stage`: what the log holds. Pure; for tests too.
std::string audit_line(const AuditEvent& event, AuditEvent::Stage stage);

class AuditLog {
 public:
  // Opens (creates) the file and starts the writer; an error names the file.
  static boost::system::result<std::shared_ptr<AuditLog>, std::string> open(AuditLogOptions options);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Queues the event; never waits for the disk (see above).
  void record(AuditEvent event, AuditEvent::Stage stage);
  // Writes what is queued and stops the writer; later events are dropped.
  void stop();

  std::uint64_t events() const { return events_.load(std::memory_order_relaxed); }
  // Dropped (queue full, stopped) or lost to a write error.
  std::uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }

 private:
  struct File;
  struct Item {
    AuditEvent event;
    AuditEvent::Stage stage;
  };
  explicit AuditLog(AuditLogOptions options, std::unique_ptr<File> file);
  void run();
  void count_dropped(std::uint64_t n, const char* why);

  AuditLogOptions options_;
  std::unique_ptr<File> file_;  // writer thread only
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> events_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::int64_t> last_warning_{0};  // steady clock, seconds
  std::thread writer_;
};

// Logs the ResponseComplete stage of a long-running request (a watch) when the last holder lets
// go of it: the HTTP session keeps it in the response until the stream ends.
std::shared_ptr<void> audit_on_completion(std::shared_ptr<AuditLog> log, AuditEvent event);

}  // namespace kwatch::server
