#include "storage/wal.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
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
// kind, revision, create revision, version, key length, value length.
constexpr std::uint32_t kMinPayload = 1 + 8 + 8 + 8 + 4 + 4;

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

std::uint64_t load_le(std::string_view s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  }
  return v;
}

std::string_view without_trailing_zeros(std::string_view s) {
  while (!s.empty() && s.back() == 0) s.remove_suffix(1);
  return s;
}

// The first offset at or after `from` where a whole record starts: checksum matches and payload
// decodes. Cheap structural filters come first (kind byte, a revision after `revision` that the
// remaining bytes could reach, key and value lengths adding up to the record length), so only
// rare candidates pay for a CRC and the scan stays linear in practice.
std::optional<std::size_t> find_record(std::string_view file, std::size_t from,
                                       std::int64_t revision) {
  const std::size_t n = file.size();
  constexpr std::size_t kMinRecord = kRecordHeader + kMinPayload;
  if (from > n || n - from < kMinRecord) return std::nullopt;
  const auto max_revision = revision + static_cast<std::int64_t>((n - from) / kMinRecord) + 1;
  for (std::size_t q = from; n - q >= kMinRecord; ++q) {
    const auto kind = static_cast<unsigned char>(file[q + kRecordHeader]);
    if (kind < 1 || kind > 3) continue;
    const auto len = static_cast<std::uint32_t>(load_le(file, q, 4));
    if (len < kMinPayload || len > kMaxRecord || len > n - q - kRecordHeader) continue;
    const auto rev = static_cast<std::int64_t>(load_le(file, q + kRecordHeader + 1, 8));
    // A compaction's revision is its target, at or below the revision it was written at.
    if (rev > max_revision || (kind == 3 ? rev < 0 : rev <= revision)) continue;
    const auto key_len = static_cast<std::uint32_t>(load_le(file, q + kRecordHeader + 25, 4));
    if (key_len > len - kMinPayload) continue;
    const auto value_len =
        static_cast<std::uint32_t>(load_le(file, q + kRecordHeader + 29 + key_len, 4));
    if (value_len != len - kMinPayload - key_len) continue;
    const std::string_view payload = file.substr(q + kRecordHeader, len);
    if (crc32(payload) != load_le(file, q + 4, 4) || !decode_payload(payload)) continue;
    return q;
  }
  return std::nullopt;
}

// Why `visible`, the first bytes of a record's payload, cannot be the start of the record that
// follows a store at `revision` in a record of `len` payload bytes; nullopt if it can be.
std::optional<std::string> implausible_prefix(std::string_view visible, std::uint32_t len,
                                              std::int64_t revision) {
  if (visible.empty()) return std::nullopt;
  const auto kind = static_cast<unsigned char>(visible[0]);
  if (kind < 1 || kind > 3) return fmt::format("its kind byte is {}, not a record kind", kind);
  const std::size_t have = visible.size();
  if (kind != 3) {
    // Only the next revision can be in flight; compare as many of its bytes as reached the disk.
    const std::int64_t next = revision + 1;
    for (std::size_t i = 0; i < 8 && 1 + i < have; ++i) {
      if (static_cast<unsigned char>(visible[1 + i]) !=
          ((static_cast<std::uint64_t>(next) >> (8 * i)) & 0xff)) {
        return fmt::format("its revision is not the next one ({})", next);
      }
    }
  } else if (have >= 9) {
    const auto target = static_cast<std::int64_t>(load_le(visible, 1, 8));
    if (target < 0 || target > revision) {
      return fmt::format("it compacts to revision {}, beyond the current {}", target, revision);
    }
  }
  if (kind == 1 && have >= 25) {
    const auto create = static_cast<std::int64_t>(load_le(visible, 9, 8));
    const auto version = static_cast<std::int64_t>(load_le(visible, 17, 8));
    if (create < 1 || create > revision + 1 || version < 1) {
      return std::string("its create revision or version is impossible");
    }
  }
  if (have >= 29) {
    const auto key_len = static_cast<std::uint32_t>(load_le(visible, 25, 4));
    if (key_len > len - kMinPayload) return std::string("its key is longer than the record");
    if (have >= 33 + static_cast<std::size_t>(key_len)) {
      const auto value_len = static_cast<std::uint32_t>(load_le(visible, 29 + key_len, 4));
      if (value_len != len - kMinPayload - key_len) {
        return std::string("its key and value lengths do not add up to its length field");
      }
    }
  }
  return std::nullopt;
}

// Where the first 512-byte sector (by file offset; the first and last may be partial) that is
// entirely zero starts in `payload`, which begins at `file_offset`: a sector the disk never got.
std::size_t first_zero_sector(std::string_view payload, std::size_t file_offset) {
  constexpr std::size_t kSector = 512;
  std::size_t at = 0;
  while (at < payload.size()) {
    const std::size_t chunk = std::min(kSector - (file_offset + at) % kSector, payload.size() - at);
    if (all_zero(payload.substr(at, chunk))) return at;
    at += chunk;
  }
  return payload.size();
}

// Decides about a bad record at `pos` of the last segment, after records up to `revision` were
// applied. nullopt: a torn tail, the record in flight at a crash (its header and a prefix of its
// payload, possibly with sectors that never reached the disk, possibly followed by zeros the
// file system allocated), which was never acknowledged. Otherwise what is wrong with it.
std::optional<std::string> check_torn_tail(std::string_view file, std::size_t pos,
                                           std::int64_t revision) {
  const std::string_view rest = file.substr(pos);
  const std::string_view head = without_trailing_zeros(rest);
  if (head.empty()) return std::nullopt;
  if (head.size() < kRecordHeader) {
    // Not even the header reached the disk whole (a sector boundary may fall inside it).
    if (head.size() >= 4) {
      const auto len = static_cast<std::uint32_t>(load_le(head, 0, 4));
      if (len < kMinPayload || len > kMaxRecord) {
        return fmt::format("a partial record header with an impossible length ({})", len);
      }
    }
    return std::nullopt;
  }
  if (auto q = find_record(file, pos + 1, revision)) {
    return fmt::format("a bad record followed by a valid one at offset {}", *q);
  }
  if (all_zero(rest.substr(0, kRecordHeader))) {
    // The header's sector never reached the disk; later sectors of the record may have.
    const std::size_t data = rest.find_first_not_of('\0');
    if ((pos + data) % 512 == 0) return std::nullopt;
    return std::string("a zero record header followed by data");
  }
  const auto len = static_cast<std::uint32_t>(load_le(rest, 0, 4));
  if (len < kMinPayload || len > kMaxRecord) {
    return fmt::format("a record length ({}) kwatch cannot have written", len);
  }
  const bool complete = rest.size() - kRecordHeader >= len;
  if (complete && !all_zero(rest.substr(kRecordHeader + len))) {
    return std::string("a bad record (checksum or content) followed by more data");
  }
  const std::string_view payload = rest.substr(kRecordHeader, len);
  const std::string_view visible =
      without_trailing_zeros(payload.substr(0, first_zero_sector(payload, pos + kRecordHeader)));
  if (complete && visible.size() == payload.size()) {
    return std::string("a complete record that fails its checksum");
  }
  if (auto why = implausible_prefix(visible, len, revision)) {
    return "a partial record that cannot be the write in flight: " + *why;
  }
  return std::nullopt;
}

// Logs why the directory is not opened and what the operator can do; returns `corrupt`.
Errc refuse(const fs::path& file, std::uint64_t offset, std::string_view what) {
  spdlog::error(
      "wal: {} is damaged at offset {}: {}. kwatch does not start rather than drop acknowledged "
      "writes. Move the data directory aside and restore it from a backup; or, to keep every "
      "write before this point and lose the ones after it, copy the directory aside, truncate "
      "{} to {} bytes and remove the segments (wal-*.log) after it.",
      file.string(), offset, what, file.filename().string(), offset);
  return Errc::corrupt;
}

// `<name>.<tag>-<unix time>` beside `path`, a name no snapshot or segment can have.
fs::path aside_name(const fs::path& path, std::string_view tag) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  fs::path out = path;
  out += fmt::format(".{}-{}", tag, now);
  for (int i = 2; fs::exists(out); ++i) {
    out = path;
    out += fmt::format(".{}-{}-{}", tag, now, i);
  }
  return out;
}

// Writes `data`, the original content of `path`, to a new file beside it (0600, synced).
Result<fs::path> keep_copy(const fs::path& path, std::string_view data) {
  const fs::path copy = aside_name(path, "torn");
  const int fd = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::error("wal: cannot create {}: {}", copy.string(), std::strerror(errno));
    return Errc::internal;
  }
  const bool ok = write_all(fd, data) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || !sync_dir(path.parent_path())) {
    spdlog::error("wal: cannot write {}: {}", copy.string(), std::strerror(errno));
    return Errc::internal;
  }
  return copy;
}

// Creates the data directory (0700), or warns when an existing one is open to group or others:
// it holds every object, Secrets included. Like etcd, it is not chmod-ed behind the owner's back.
Result<void> prepare_dir(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      spdlog::error("wal: {} is not a directory", dir.string());
      return Errc::internal;
    }
    if ((st.st_mode & 077) != 0) {
      spdlog::warn(
          "wal: data directory {} is accessible by group or others (mode {:04o}); it holds every "
          "object including Secrets, the recommended mode is 0700 (chmod 700 {})",
          dir.string(), st.st_mode & 07777, dir.string());
    }
    return {};
  }
  std::error_code ec;
  if (dir.has_parent_path() && !dir.parent_path().empty()) {
    fs::create_directories(dir.parent_path(), ec);
  }
  if (ec || (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)) {
    spdlog::error("wal: cannot create {}: {}", dir.string(),
                  ec ? ec.message() : std::strerror(errno));
    return Errc::internal;
  }
  return {};
}

// What a WAL directory holds, by kind: snapshots and segments by sequence number (ascending), and
// files a crash left half-written (removed once recovery succeeded).
struct WalFiles {
  std::vector<std::uint64_t> snapshots;
  std::vector<std::uint64_t> segments;
  std::vector<fs::path> unfinished;
};

Result<WalFiles> list_wal_files(const fs::path& dir) {
  WalFiles files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".tmp")) {
      files.unfinished.push_back(entry.path());
    } else if (auto s = parse_seq(name, "snap-", ".snap")) {
      files.snapshots.push_back(*s);
    } else if (auto w = parse_seq(name, "wal-", ".log")) {
      files.segments.push_back(*w);
    }
  }
  if (ec) return Errc::internal;
  std::sort(files.snapshots.begin(), files.snapshots.end());
  std::sort(files.segments.begin(), files.segments.end());
  return files;
}

// Where recovery starts: a snapshot's state (none: the empty store), the first segment to replay
// and those after it, and the newer snapshots that failed their checksum.
struct RecoveryBase {
  std::uint64_t base = 1;  // the first segment to replay
  std::optional<StoreState> state;
  std::vector<std::uint64_t> segments;  // from `base` on, contiguous
  std::vector<std::uint64_t> damaged;
};

// The base: the newest snapshot that passes its checksum. If it does not, the previous
// generation (the snapshot before it, or the empty store before the first one) and every
// segment since, which write_snapshot keeps for exactly this.
Result<RecoveryBase> choose_base(const fs::path& dir, const WalFiles& files) {
  RecoveryBase out;
  for (auto it = files.snapshots.rbegin(); it != files.snapshots.rend() && !out.state; ++it) {
    const fs::path path = dir / seq_name("snap-", *it, ".snap");
    auto data = read_file(path);
    if (!data) return data.error();
    if (auto state = decode_snapshot(*data)) {
      out.base = *it;
      out.state = std::move(*state);
    } else {
      spdlog::error("wal: snapshot {} is damaged (bad magic, length or checksum)", path.string());
      out.damaged.push_back(*it);
    }
  }
  out.segments = files.segments;
  std::erase_if(out.segments, [&](std::uint64_t s) { return s < out.base; });
  const auto& segments = out.segments;
  if (!out.damaged.empty()) {
    // Records up to the newest damaged snapshot are only in the segments from the base to it.
    const std::uint64_t need = out.damaged.front() - 1;
    if (segments.empty() || segments.front() != out.base || segments.back() < need) {
      return refuse(dir / seq_name("snap-", out.damaged.front(), ".snap"), 0,
                    "the snapshot fails its checksum and there is no complete previous "
                    "generation (snapshot and log since it) to fall back to");
    }
    spdlog::error(
        "wal: FALLING BACK to {} and replaying every segment since it, because the newer "
        "snapshot(s) {} are damaged; nothing acknowledged is lost, but check the disk",
        out.state ? (dir / seq_name("snap-", out.base, ".snap")).string()
                  : std::string("the empty store"),
        fmt::join(out.damaged, ", "));
  }
  // Segments from the base on must all be there: one missing would silently drop its records.
  // (Only the segment a snapshot starts may be absent, after a crash just after the snapshot.)
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const std::uint64_t want = i == 0 ? out.base : segments[i - 1] + 1;
    if (segments[i] != want) {
      return refuse(dir / seq_name("wal-", want, ".log"), 0,
                    "this segment is missing, but later ones exist");
    }
  }
  return out;
}

// What replaying one segment did: where its last good record ends, how many records it held,
// and whether it ends in a torn record (possible only in the last segment).
struct Replayed {
  std::size_t pos = 0;
  std::size_t records = 0;
  bool torn = false;
};

// Applies the records of segment `path` (its bytes `file`) to `store`. A bad header or record is
// fatal, except at the tail of the `last` segment, where check_torn_tail decides.
Result<Replayed> replay_segment(const fs::path& path, std::string_view file, bool last,
                                MvccStore& store) {
  Replayed out;
  if (file.size() < kLogMagic.size() || file.substr(0, kLogMagic.size()) != kLogMagic) {
    // Only a segment whose creation was interrupted can lack its header.
    if (!last || (!all_zero(file) && !kLogMagic.starts_with(file))) {
      return refuse(path, 0, "the segment header is bad");
    }
    out.torn = true;
    return out;
  }
  std::size_t& pos = out.pos;
  pos = kLogMagic.size();
  while (pos < file.size()) {
    Reader header{file.substr(pos)};
    const std::uint32_t len = header.u32();
    const std::uint32_t crc = header.u32();
    std::optional<Mutation> m;
    if (header.ok && len <= kMaxRecord && file.size() - pos - kRecordHeader >= len) {
      const auto payload = file.substr(pos + kRecordHeader, len);
      if (crc32(payload) == crc) m = decode_payload(payload);
    }
    if (!m) {
      if (!last) {
        return refuse(path, pos, "a record fails its checksum in a segment before the last one");
      }
      if (auto why = check_torn_tail(file, pos, store.current_revision())) {
        return refuse(path, pos, *why);
      }
      out.torn = true;
      break;
    }
    if (auto r = store.apply(*m); !r) {
      return refuse(path, pos,
                    fmt::format("record of revision {} does not follow revision {}", m->revision,
                                store.current_revision()));
    }
    pos += kRecordHeader + len;
    ++out.records;
  }
  return out;
}

// Moves damaged snapshots out of the way (not deleted: they are evidence), so the next snapshot
// counts the one recovered from as the previous generation.
Result<void> set_aside(const fs::path& dir, const std::vector<std::uint64_t>& damaged) {
  std::error_code ec;
  for (std::uint64_t s : damaged) {
    const fs::path path = dir / seq_name("snap-", s, ".snap");
    const fs::path moved = aside_name(path, "damaged");
    fs::rename(path, moved, ec);
    if (ec) {
      spdlog::error("wal: cannot move {} aside: {}", path.string(), ec.message());
      return Errc::internal;
    }
    spdlog::warn("wal: the damaged snapshot is kept as {}", moved.string());
  }
  if (!damaged.empty() && !sync_dir(dir)) return Errc::internal;
  return {};
}

}  // namespace

Wal::Wal(WalOptions options) : options_(std::move(options)) {}

Wal::~Wal() {
  if (fd_ < 0) return;
  // Without a sync per write (--data-dir-fsync=false), a clean exit still leaves every
  // acknowledged write on disk.
  if (!options_.sync) ::fdatasync(fd_);
  ::close(fd_);
}

fs::path Wal::segment_path() const { return options_.dir / seq_name("wal-", seq_, ".log"); }

Result<std::unique_ptr<Wal>> Wal::open(WalOptions options, MvccStore& store) {
  if (auto r = prepare_dir(options.dir); !r) return r.error();
  std::unique_ptr<Wal> wal(new Wal(std::move(options)));
  const fs::path& dir = wal->options_.dir;
  auto files = list_wal_files(dir);
  if (!files) return files.error();
  auto base = choose_base(dir, *files);
  if (!base) return base.error();
  if (base->state) store.restore(std::move(*base->state));

  const auto& segments = base->segments;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    const fs::path path = dir / seq_name("wal-", segments[i], ".log");
    auto data = read_file(path);
    if (!data) return data.error();
    auto replayed = replay_segment(path, *data, last, store);
    if (!replayed) return replayed.error();
    wal->log_bytes_ += replayed->pos;
    wal->log_records_ += replayed->records;
    if (last) {
      if (auto r = wal->resume_segment(segments[i], path, *data, replayed->pos, replayed->torn);
          !r) {
        return r.error();
      }
    }
  }
  if (auto r = set_aside(dir, base->damaged); !r) return r.error();
  std::error_code ec;
  for (const auto& path : files->unfinished) fs::remove(path, ec);
  if (wal->fd_ < 0) {
    if (auto r = wal->start_segment(base->base); !r) return r.error();
  }
  return wal;
}

Result<void> Wal::resume_segment(std::uint64_t seq, const fs::path& path, std::string_view file,
                                 std::size_t pos, bool torn) {
  seq_ = seq;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) return Errc::internal;
  if (torn && pos < file.size()) {
    // Never cut without keeping the original: a wrong verdict must stay recoverable by hand.
    auto copy = keep_copy(path, file);
    if (!copy) return copy.error();
    spdlog::warn(
        "wal: {} ends in a torn record (the write in flight at a crash, never acknowledged) "
        "at offset {}; cutting {} bytes. The original segment is kept as {}",
        path.string(), pos, file.size() - pos, copy->string());
  }
  if (torn) {
    if (::ftruncate(fd_, static_cast<off_t>(pos)) != 0) return Errc::internal;
    if (pos == 0 && !write_all(fd_, kLogMagic)) return Errc::internal;
    if (pos == 0) pos = kLogMagic.size();
    if (::fdatasync(fd_) != 0) return Errc::internal;
  }
  offset_ = pos;
  if (::lseek(fd_, static_cast<off_t>(pos), SEEK_SET) < 0) return Errc::internal;
  return {};
}

Result<void> Wal::start_segment(std::uint64_t seq) {
  const fs::path path = options_.dir / seq_name("wal-", seq, ".log");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
  // Keep one previous generation, the snapshot before this one (before the first snapshot: the
  // empty store) and every segment from it on, so that open can fall back to it if this snapshot
  // turns out damaged. Older generations go.
  std::vector<std::uint64_t> snapshots;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    if (auto s = parse_seq(entry.path().filename().string(), "snap-", ".snap"); s && *s < seq) {
      snapshots.push_back(*s);
    }
  }
  if (ec || snapshots.empty()) return {};
  const std::uint64_t previous = *std::max_element(snapshots.begin(), snapshots.end());
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    auto s = parse_seq(name, "snap-", ".snap");
    if (!s) s = parse_seq(name, "wal-", ".log");
    if (s && *s < previous) fs::remove(entry.path(), ec);
  }
  sync_dir(options_.dir);
  return {};
}

}  // namespace kwatch::storage
