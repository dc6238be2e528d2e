#include "storage/wal.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/crc.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace kwatch::storage {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kLogMagic{"KWWAL\0\0\1", 8};
constexpr std::string_view kSnapMagic{"KWSNP\0\0\1", 8};
constexpr std::size_t kRecordHeader = 8;
// A larger length field cannot come from us: treat it as garbage rather than trying to read it.
constexpr std::uint32_t kMaxRecord = 1u << 30;

std::uint32_t crc32(std::string_view data) {
  boost::crc_32_type crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_i64(std::string& out, std::int64_t v) { put_u64(out, static_cast<std::uint64_t>(v)); }
void put_bytes(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

// Bounds-checked little-endian reader; any overrun sets `ok` to false.
struct Reader {
  std::string_view in;
  bool ok = true;

  std::uint64_t uint(int bytes) {
    if (in.size() < static_cast<std::size_t>(bytes)) {
      ok = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
    }
    in.remove_prefix(bytes);
    return v;
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint(4)); }
  std::int64_t i64() { return static_cast<std::int64_t>(uint(8)); }
  std::string_view bytes() {
    const std::uint32_t n = u32();
    if (!ok || in.size() < n) {
      ok = false;
      return {};
    }
    auto s = in.substr(0, n);
    in.remove_prefix(n);
    return s;
  }
};

void encode_record(std::string& out, const Mutation& m) {
  out.clear();
  out.resize(kRecordHeader);
  out.push_back(static_cast<char>(m.kind));
  put_i64(out, m.revision);
  put_i64(out, m.create_revision);
  put_i64(out, m.version);
  put_bytes(out, m.key);
  put_bytes(out, m.value ? std::string_view(*m.value) : std::string_view());
  const std::string_view payload = std::string_view(out).substr(kRecordHeader);
  std::string header;
  put_u32(header, static_cast<std::uint32_t>(payload.size()));
  put_u32(header, crc32(payload));
  std::copy(header.begin(), header.end(), out.begin());
}

std::optional<Mutation> decode_payload(std::string_view payload) {
  Reader r{payload};
  Mutation m;
  const auto kind = r.uint(1);
  m.revision = r.i64();
  m.create_revision = r.i64();
  m.version = r.i64();
  m.key = std::string(r.bytes());
  auto value = r.bytes();
  if (!r.ok || !r.in.empty() || kind < 1 || kind > 3) return std::nullopt;
  m.kind = static_cast<Mutation::Kind>(kind);
  if (m.kind == Mutation::Kind::put) m.value = std::make_shared<const std::string>(value);
  return m;
}

std::string seq_name(std::string_view stem, std::uint64_t seq, std::string_view ext) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(seq));
  return std::string(stem) + buf + std::string(ext);
}

// Parses "<stem><16 hex digits><ext>".
std::optional<std::uint64_t> parse_seq(const std::string& name, std::string_view stem,
                                       std::string_view ext) {
  if (name.size() != stem.size() + 16 + ext.size() || !name.starts_with(stem) ||
      !name.ends_with(ext)) {
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (char c : std::string_view(name).substr(stem.size(), 16)) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = v * 16 + static_cast<std::uint64_t>(d);
  }
  return v;
}

Result<std::string> read_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errc::internal;
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Errc::internal;
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return data;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A rename or a new file is durable only once its directory is synced.
bool sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

Result<StoreState> decode_snapshot(std::string_view data) {
  if (data.size() < kSnapMagic.size() + 4 || data.substr(0, kSnapMagic.size()) != kSnapMagic) {
    return Errc::corrupt;
  }
  const std::string_view body = data.substr(kSnapMagic.size(), data.size() - kSnapMagic.size() - 4);
  Reader tail{data.substr(data.size() - 4)};
  if (tail.u32() != crc32(body)) return Errc::corrupt;
  Reader r{body};
  StoreState state;
  state.revision = r.i64();
  state.compacted_revision = r.i64();
  const std::uint64_t count = r.uint(8);
  if (!r.ok || count > body.size()) return Errc::corrupt;
  state.entries.reserve(count);
  for (std::uint64_t i = 0; i < count && r.ok; ++i) {
    SnapshotEntry e;
    e.key = std::string(r.bytes());
    e.value = std::make_shared<const std::string>(r.bytes());
    e.create_revision = r.i64();
    e.mod_revision = r.i64();
    e.version = r.i64();
    state.entries.push_back(std::move(e));
  }
  if (!r.ok || !r.in.empty()) return Errc::corrupt;
  return state;
}

bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

}  // namespace

Wal::Wal(WalOptions options) : options_(std::move(options)) {}

Wal::~Wal() {
  if (fd_ >= 0) ::close(fd_);
}

fs::path Wal::segment_path() const { return options_.dir / seq_name("wal-", seq_, ".log"); }

Result<std::unique_ptr<Wal>> Wal::open(WalOptions options, MvccStore& store) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) {
    spdlog::error("wal: cannot create {}: {}", options.dir.string(), ec.message());
    return Errc::internal;
  }
  std::unique_ptr<Wal> wal(new Wal(std::move(options)));
  const fs::path& dir = wal->options_.dir;

  std::vector<std::uint64_t> snapshots;
  std::vector<std::uint64_t> segments;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".tmp")) {
      fs::remove(entry.path(), ec);
    } else if (auto s = parse_seq(name, "snap-", ".snap")) {
      snapshots.push_back(*s);
    } else if (auto w = parse_seq(name, "wal-", ".log")) {
      segments.push_back(*w);
    }
  }
  if (ec) return Errc::internal;
  std::sort(snapshots.begin(), snapshots.end());
  std::sort(segments.begin(), segments.end());

  std::uint64_t first_seq = 0;
  if (!snapshots.empty()) {
    // Older snapshots are removed only after a newer one is durable, so the newest must be good.
    first_seq = snapshots.back();
    const fs::path path = dir / seq_name("snap-", first_seq, ".snap");
    auto data = read_file(path);
    if (!data) return data.error();
    auto state = decode_snapshot(*data);
    if (!state) {
      spdlog::error("wal: snapshot {} is corrupt", path.string());
      return Errc::corrupt;
    }
    store.restore(std::move(*state));
  }
  std::erase_if(segments, [&](std::uint64_t s) { return s < first_seq; });

  for (std::size_t i = 0; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    const fs::path path = dir / seq_name("wal-", segments[i], ".log");
    auto data = read_file(path);
    if (!data) return data.error();
    const std::string_view file(*data);
    std::size_t pos = 0;
    std::size_t records = 0;
    bool torn = false;
    if (file.size() < kLogMagic.size() || file.substr(0, kLogMagic.size()) != kLogMagic) {
      // Only a segment whose creation was interrupted can lack its header.
      if (!last || (!all_zero(file) && !kLogMagic.starts_with(file))) {
        spdlog::error("wal: segment {} has a bad header", path.string());
        return Errc::corrupt;
      }
      torn = true;
    } else {
      pos = kLogMagic.size();
    }
    while (!torn && pos < file.size()) {
      Reader header{file.substr(pos)};
      const std::uint32_t len = header.u32();
      const std::uint32_t crc = header.u32();
      const bool complete =
          header.ok && len <= kMaxRecord && file.size() - pos - kRecordHeader >= len;
      std::optional<Mutation> m;
      if (complete) {
        const auto payload = file.substr(pos + kRecordHeader, len);
        if (crc32(payload) == crc) m = decode_payload(payload);
      }
      if (!m) {
        const std::size_t end = complete ? pos + kRecordHeader + len : file.size();
        // The record in flight at a crash reaches the end of the file, possibly followed by
        // zeros the file system allocated; a bad record with data after it is real corruption.
        if (last && (end == file.size() || all_zero(file.substr(end)))) {
          torn = true;
          break;
        }
        spdlog::error("wal: corrupt record in {} at offset {}", path.string(), pos);
        return Errc::corrupt;
      }
      if (auto r = store.apply(*m); !r) {
        spdlog::error("wal: record at offset {} of {} does not follow the state", pos,
                      path.string());
        return r.error();
      }
      pos += kRecordHeader + len;
      ++records;
    }
    wal->log_bytes_ += pos;
    wal->log_records_ += records;
    if (!last) continue;

    wal->seq_ = segments[i];
    wal->fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (wal->fd_ < 0) return Errc::internal;
    if (torn) {
      spdlog::warn("wal: cutting a torn tail of {} at offset {} ({} bytes dropped)", path.string(),
                   pos, file.size() - pos);
      if (::ftruncate(wal->fd_, static_cast<off_t>(pos)) != 0) return Errc::internal;
      if (pos == 0 && !write_all(wal->fd_, kLogMagic)) return Errc::internal;
      if (pos == 0) pos = kLogMagic.size();
      if (::fdatasync(wal->fd_) != 0) return Errc::internal;
    }
    wal->offset_ = pos;
    if (::lseek(wal->fd_, static_cast<off_t>(pos), SEEK_SET) < 0) return Errc::internal;
  }
  if (wal->fd_ < 0) {
    if (auto r = wal->start_segment(first_seq == 0 ? 1 : first_seq); !r) return r.error();
  }
  return wal;
}

Result<void> Wal::start_segment(std::uint64_t seq) {
  const fs::path path = options_.dir / seq_name("wal-", seq, ".log");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errc::internal;
  if (!write_all(fd, kLogMagic) || ::fsync(fd) != 0 || !sync_dir(options_.dir)) {
    ::close(fd);
    return Errc::internal;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  seq_ = seq;
  offset_ = kLogMagic.size();
  return {};
}

Result<void> Wal::append(const Mutation& mutation) {
  if (broken_) return Errc::internal;
  encode_record(buffer_, mutation);
  if (write_all(fd_, buffer_) && (!options_.sync || ::fdatasync(fd_) == 0)) {
    offset_ += buffer_.size();
    log_bytes_ += buffer_.size();
    ++log_records_;
    return {};
  }
  spdlog::error("wal: append to {} failed: {}", segment_path().string(), std::strerror(errno));
  // Cut whatever part of the record reached the file, so later records are not appended after
  // garbage. If that fails too we cannot vouch for the log any more. After a failed fdatasync
  // the page cache state is unknown (the kernel may have dropped the dirty pages), so stop too.
  if (::ftruncate(fd_, static_cast<off_t>(offset_)) != 0 ||
      ::lseek(fd_, static_cast<off_t>(offset_), SEEK_SET) < 0 || options_.sync) {
    broken_ = true;
  }
  return Errc::internal;
}

bool Wal::snapshot_due() const {
  const std::uint64_t bytes = log_bytes_ - retry_bytes_;
  const std::uint64_t records = log_records_ - retry_records_;
  return (options_.snapshot_log_bytes != 0 && bytes >= options_.snapshot_log_bytes) ||
         (options_.snapshot_log_records != 0 && records >= options_.snapshot_log_records);
}

Result<void> Wal::write_snapshot(const StoreState& state) {
  if (broken_) return Errc::internal;
  // If this attempt fails (e.g. a full disk), wait for another threshold's worth of log before
  // the next one instead of retrying on every write.
  retry_bytes_ = log_bytes_;
  retry_records_ = log_records_;
  const std::uint64_t seq = seq_ + 1;
  const fs::path tmp = options_.dir / seq_name("snap-", seq, ".tmp");
  const fs::path final_path = options_.dir / seq_name("snap-", seq, ".snap");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errc::internal;

  boost::crc_32_type crc;
  std::string chunk;
  bool ok = write_all(fd, kSnapMagic);
  // Stream the body in chunks so a large state is never encoded twice in memory.
  auto flush = [&](bool force) {
    if (!ok || (!force && chunk.size() < (1u << 20))) return;
    crc.process_bytes(chunk.data(), chunk.size());
    ok = write_all(fd, chunk);
    chunk.clear();
  };
  put_i64(chunk, state.revision);
  put_i64(chunk, state.compacted_revision);
  put_u64(chunk, state.entries.size());
  for (const auto& e : state.entries) {
    put_bytes(chunk, e.key);
    put_bytes(chunk, e.value ? std::string_view(*e.value) : std::string_view());
    put_i64(chunk, e.create_revision);
    put_i64(chunk, e.mod_revision);
    put_i64(chunk, e.version);
    flush(false);
  }
  flush(true);
  std::string trailer;
  put_u32(trailer, crc.checksum());
  ok = ok && write_all(fd, trailer) && ::fsync(fd) == 0;
  ::close(fd);
  std::error_code ec;
  if (!ok) {
    fs::remove(tmp, ec);
    return Errc::internal;
  }
  fs::rename(tmp, final_path, ec);
  if (ec || !sync_dir(options_.dir)) {
    fs::remove(tmp, ec);
    return Errc::internal;
  }
  // From here the snapshot is the recovery point; the new segment must exist before anything
  // else is appended.
  if (auto r = start_segment(seq); !r) {
    broken_ = true;
    return r;
  }
  log_bytes_ = log_records_ = retry_bytes_ = retry_records_ = 0;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    auto s = parse_seq(name, "snap-", ".snap");
    if (!s) s = parse_seq(name, "wal-", ".log");
    if (s && *s < seq) fs::remove(entry.path(), ec);
  }
  sync_dir(options_.dir);
  return {};
}

}  // namespace kwatch::storage
