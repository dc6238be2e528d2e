#include "storage/wal.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace kwatch::storage {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::vector<fs::path> files_with(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every file of `dir` with its bytes: a refused open must leave all of them as they were.
std::map<std::string, std::string> dir_contents(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    out[e.path().filename().string()] = read_bytes(e.path());
  }
  return out;
}

// The copies of torn segments (`<segment>.torn-<time>`) in `dir`.
std::vector<fs::path> torn_copies(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".log.torn-") != std::string::npos) {
      out.push_back(e.path());
    }
  }
  return out;
}

// Where each record of a segment starts.
std::vector<std::size_t> record_offsets(const std::string& segment) {
  std::vector<std::size_t> out;
  std::size_t pos = 8;  // after the magic
  while (pos + 8 <= segment.size()) {
    out.push_back(pos);
    std::uint32_t len = 0;
    for (int i = 0; i < 4; ++i) {
      len |= static_cast<std::uint32_t>(static_cast<unsigned char>(segment[pos + i])) << (8 * i);
    }
    pos += 8 + len;
  }
  return out;
}

unsigned permissions_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// Captures what is logged while it lives (the operator reads the log to learn what happened).
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    logger->set_level(spdlog::level::warn);
    spdlog::set_default_logger(std::move(logger));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const { return out_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

// A store made durable the way MemoryStorage does it.
struct Durable {
  MvccStore store;
  std::unique_ptr<Wal> wal;

  static Result<std::unique_ptr<Durable>> open(WalOptions options) {
    auto d = std::make_unique<Durable>();
    auto wal = Wal::open(std::move(options), d->store);
    if (!wal) return wal.error();
    d->wal = std::move(*wal);
    Durable* self = d.get();
    d->store.set_commit_hook([self](const Mutation& m) -> Result<void> {
      if (self->wal->snapshot_due()) {
        if (auto r = self->wal->write_snapshot(self->store.export_state()); !r) return r;
      }
      return self->wal->append(m);
    });
    return d;
  }
};

class WalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kwatch-wal-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  WalOptions options() const {
    WalOptions o;
    o.dir = dir_;
    o.snapshot_log_bytes = 0;  // no snapshots unless a test asks for them
    return o;
  }

  std::unique_ptr<Durable> open_ok(WalOptions o) {
    auto d = Durable::open(std::move(o));
    EXPECT_TRUE(d) << (d ? "" : d.error().message());
    return d ? std::move(*d) : nullptr;
  }

  // Writes /k0../k<n-1> (values "value <i>", revisions 2..n+1) into one segment; returns it.
  fs::path write_records(int n) {
    auto d = open_ok(options());
    if (!d) return {};
    for (int i = 0; i < n; ++i) {
      EXPECT_TRUE(d->store.put_if("/k" + std::to_string(i), 0, "value " + std::to_string(i)));
    }
    return d->wal->segment_path();
  }

  // Opens, expecting `corrupt`, the directory untouched, and an error log that names the file,
  // the offset (when given) and what to do.
  void expect_refused_and_unchanged(const fs::path& file = {}, std::size_t offset = 0) {
    const auto before = dir_contents(dir_);
    LogCapture log;
    auto d = Durable::open(options());
    ASSERT_FALSE(d) << "opened at revision " << (*d)->store.current_revision();
    EXPECT_EQ(d.error(), Errc::corrupt);
    EXPECT_TRUE(dir_contents(dir_) == before) << "the data directory was changed";
    if (!file.empty()) {
      const std::string text = log.text();
      EXPECT_NE(text.find(file.string() + " is damaged at offset " + std::to_string(offset)),
                std::string::npos)
          << text;
      EXPECT_NE(text.find("restore it from a backup"), std::string::npos) << text;
    }
  }

  // Flips the high byte of the length field of record `index` (with several patterns: lengths
  // just past the end of the file, far past it, and beyond what kwatch can write) and expects
  // each to be refused with every file left as it was.
  void expect_flipped_length_refused(int records, int index) {
    const fs::path segment = write_records(records);
    const std::string good = read_bytes(segment);
    const auto offsets = record_offsets(good);
    ASSERT_EQ(offsets.size(), static_cast<std::size_t>(records));
    for (unsigned char flip : {0x01, 0x10, 0x3f, 0x80, 0xff}) {
      SCOPED_TRACE("high length byte ^ " + std::to_string(flip));
      std::string bad = good;
      bad[offsets[index] + 3] = static_cast<char>(bad[offsets[index] + 3] ^ flip);
      write_bytes(segment, bad);
      expect_refused_and_unchanged(segment, offsets[index]);
      EXPECT_EQ(read_bytes(segment), bad);
    }
  }

  fs::path dir_;
};

void expect_same_state(const MvccStore& a, const MvccStore& b) {
  auto sa = a.export_state();
  auto sb = b.export_state();
  EXPECT_EQ(sa.revision, sb.revision);
  ASSERT_EQ(sa.entries.size(), sb.entries.size());
  for (std::size_t i = 0; i < sa.entries.size(); ++i) {
    EXPECT_EQ(sa.entries[i].key, sb.entries[i].key);
    EXPECT_EQ(*sa.entries[i].value, *sb.entries[i].value);
    EXPECT_EQ(sa.entries[i].create_revision, sb.entries[i].create_revision);
    EXPECT_EQ(sa.entries[i].mod_revision, sb.entries[i].mod_revision);
    EXPECT_EQ(sa.entries[i].version, sb.entries[i].version);
  }
}

TEST_F(WalTest, RestartRestoresKeysValuesRevisionsAndVersions) {
  MvccStore expected;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    for (MvccStore* s : {&d->store, &expected}) {
      ASSERT_TRUE(s->put_if("/a", 0, "1"));                                              // 2
      ASSERT_TRUE(s->put_if("/b", 0, std::string(1024, 'b')));                           // 3
      ASSERT_TRUE(s->put_if("/a", 2, "2"));                                              // 4
      ASSERT_TRUE(s->delete_if("/b"));                                                   // 5
      ASSERT_TRUE(s->put_if("/b", 0, "again"));                                          // 6
      ASSERT_TRUE(s->delete_if("/a"));                                                   // 7
      ASSERT_TRUE(s->put_if(std::string("/bin\0ary", 8), 0, std::string("\0\xff", 2)));  // 8
    }
  }
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  expect_same_state(d->store, expected);
  EXPECT_EQ(d->store.current_revision(), 8);
  auto b = d->store.get("/b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->create_revision, 6);
  EXPECT_EQ(b->version, 1);
  // The log is replayed, so history written since the last snapshot is still readable.
  auto old = d->store.get("/a", 4);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->value, "2");
  auto next = d->store.put_if("/c", 0, "c");
  ASSERT_TRUE(next && next->succeeded);
  EXPECT_EQ(next->revision, 9);
}

TEST_F(WalTest, EmptyDirectoryOpensAsAnEmptyStoreAtRevisionOne) {
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.current_revision(), 1);
  d.reset();
  d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.current_revision(), 1);
}

// Cuts the segment at every byte offset inside the last record: recovery must keep all earlier
// records, drop the partial one and accept new writes after it.
TEST_F(WalTest, TornLastRecordIsCutAtEveryOffsetAndEarlierDataSurvives) {
  fs::path segment;
  std::uintmax_t before_last = 0;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    ASSERT_TRUE(d->store.put_if("/b", 0, "second"));
    segment = d->wal->segment_path();
    before_last = fs::file_size(segment);
    ASSERT_TRUE(d->store.put_if("/c", 0, "third, the one in flight"));
  }
  const std::string full = read_bytes(segment);
  ASSERT_GT(full.size(), before_last);
  for (std::size_t cut = before_last; cut < full.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    write_bytes(segment, full.substr(0, cut));
    {
      auto d = open_ok(options());
      ASSERT_TRUE(d);
      EXPECT_EQ(d->store.current_revision(), 3);
      EXPECT_EQ(d->store.get("/a")->value, "first");
      EXPECT_EQ(d->store.get("/b")->value, "second");
      EXPECT_EQ(d->store.get("/c").error(), Errc::not_found);
      EXPECT_EQ(fs::file_size(segment), before_last);
      // Nothing is cut without a copy of the original beside it.
      const auto copies = torn_copies(dir_);
      if (cut == before_last) {
        EXPECT_TRUE(copies.empty());
      } else {
        ASSERT_EQ(copies.size(), 1u);
        EXPECT_EQ(read_bytes(copies[0]), full.substr(0, cut));
        fs::remove(copies[0]);
      }
      auto r = d->store.put_if("/d", 0, "after recovery");
      ASSERT_TRUE(r && r->succeeded);
      EXPECT_EQ(r->revision, 4);
    }
    auto again = open_ok(options());
    ASSERT_TRUE(again);
    EXPECT_EQ(again->store.get("/d")->mod_revision, 4);
  }
}

// A complete last record that fails its checksum reached the disk whole, so it was probably
// acknowledged: a flipped byte anywhere in it is damage, not a torn write.
TEST_F(WalTest, FlippedByteInACompleteLastRecordRefusesToOpenAndChangesNothing) {
  fs::path segment;
  std::uintmax_t before_last = 0;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    ASSERT_TRUE(d->store.put_if("/b", 0, "second"));
    segment = d->wal->segment_path();
    before_last = fs::file_size(segment);
    ASSERT_TRUE(d->store.put_if("/c", 0, "third"));
  }
  const std::string full = read_bytes(segment);
  for (std::size_t at = before_last; at < full.size(); ++at) {
    SCOPED_TRACE("flip at " + std::to_string(at));
    std::string bad = full;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    write_bytes(segment, bad);
    expect_refused_and_unchanged();
  }
}

TEST_F(WalTest, FlippedHighLengthByteOfTheFirstRecordRefusesToOpenAndChangesNothing) {
  expect_flipped_length_refused(5, 0);
}

TEST_F(WalTest, FlippedHighLengthByteOfAMiddleRecordRefusesToOpenAndChangesNothing) {
  expect_flipped_length_refused(5, 2);
}

TEST_F(WalTest, FlippedHighLengthByteOfTheLastButOneRecordRefusesToOpenAndChangesNothing) {
  expect_flipped_length_refused(5, 3);
}

// The scan for valid records after a bad header must stay near linear: a large segment of
// binary values (which contain plenty of bytes that look like record kinds) is judged quickly.
TEST_F(WalTest, FlippedLengthByteAtTheStartOfALargeSegmentIsFoundWithoutReadingForever) {
  auto o = options();
  o.sync = false;
  fs::path segment;
  {
    auto d = open_ok(o);
    ASSERT_TRUE(d);
    std::string value(1 << 20, '\0');
    std::uint32_t x = 12345;
    for (int i = 0; i < 24; ++i) {
      for (auto& c : value) {
        x = x * 1103515245u + 12345u;
        c = static_cast<char>((x >> 16) % 4);  // bytes 0..3: every one a kind or a zero
      }
      ASSERT_TRUE(d->store.put_if("/big" + std::to_string(i), 0, value));
    }
    segment = d->wal->segment_path();
  }
  std::string bad = read_bytes(segment);
  ASSERT_GT(bad.size(), 24u << 20);
  bad[8 + 3] = static_cast<char>(bad[8 + 3] ^ 0x02);  // now 32 MiB more: past the end
  write_bytes(segment, bad);
  expect_refused_and_unchanged(segment, 8);
}

// A partial last record whose visible bytes cannot start the next record is not a torn write.
TEST_F(WalTest, PartialLastRecordWithAWrongKindOrRevisionRefusesToOpen) {
  fs::path segment;
  std::uintmax_t before_last = 0;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    segment = d->wal->segment_path();
    before_last = fs::file_size(segment);
    ASSERT_TRUE(d->store.put_if("/b", 0, "second, cut short below"));
  }
  const std::string full = read_bytes(segment);
  const std::string torn = full.substr(0, full.size() - 5);
  for (std::size_t at : {before_last + 8,         // the kind byte
                         before_last + 8 + 1}) {  // the low byte of the revision
    SCOPED_TRACE("flip at " + std::to_string(at));
    std::string bad = torn;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    write_bytes(segment, bad);
    expect_refused_and_unchanged();
  }
}

TEST_F(WalTest, TornLastRecordFollowedByZerosIsCutAndTheOriginalKept) {
  fs::path segment;
  std::uintmax_t before_last = 0;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    ASSERT_TRUE(d->store.put_if("/b", 0, "second"));
    segment = d->wal->segment_path();
    before_last = fs::file_size(segment);
    ASSERT_TRUE(d->store.put_if("/c", 0, std::string(2000, 'c')));
  }
  const std::string full = read_bytes(segment);
  // A partial header, the header alone, the header and part of the payload: each followed by
  // zeros the file system allocated, up to and past where the record would have ended.
  for (std::size_t cut :
       {before_last + 3, before_last + 8, before_last + 8 + 20, before_last + 8 + 700}) {
    for (std::size_t zeros : {std::size_t{1}, std::size_t{100}, std::size_t{4096}}) {
      SCOPED_TRACE("cut at " + std::to_string(cut) + " + " + std::to_string(zeros) + " zeros");
      const std::string torn = full.substr(0, cut) + std::string(zeros, '\0');
      write_bytes(segment, torn);
      {
        LogCapture log;
        auto d = open_ok(options());
        ASSERT_TRUE(d);
        EXPECT_EQ(d->store.current_revision(), 3);
        EXPECT_EQ(d->store.get("/b")->value, "second");
        EXPECT_EQ(d->store.get("/c").error(), Errc::not_found);
        EXPECT_EQ(fs::file_size(segment), before_last);
        auto copies = torn_copies(dir_);
        ASSERT_EQ(copies.size(), 1u);
        EXPECT_EQ(read_bytes(copies[0]), torn);
        EXPECT_EQ(permissions_of(copies[0]), 0600u);
        EXPECT_NE(log.text().find("kept as " + copies[0].string()), std::string::npos)
            << log.text();
        fs::remove(copies[0]);
      }
    }
  }
}

// A sector boundary can fall inside a header: its first bytes reached the disk, the rest reads as
// zeros, so the length field lost its high bytes.
TEST_F(WalTest, TornHeaderWhoseLengthLostItsHighByteIsCut) {
  fs::path segment;
  std::uintmax_t before_last = 0;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    segment = d->wal->segment_path();
    before_last = fs::file_size(segment);
    // Payload of 33 + 2 + 226 = 261 = 0x105 bytes: without its high byte the length reads 5.
    ASSERT_TRUE(d->store.put_if("/c", 0, std::string(226, 'c')));
  }
  const std::string full = read_bytes(segment);
  ASSERT_EQ(static_cast<unsigned char>(full[before_last]), 0x05);
  ASSERT_EQ(static_cast<unsigned char>(full[before_last + 1]), 0x01);
  const std::string torn = full.substr(0, before_last + 1) + std::string(400, '\0');
  write_bytes(segment, torn);
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.current_revision(), 2);
  EXPECT_EQ(fs::file_size(segment), before_last);
  ASSERT_EQ(torn_copies(dir_).size(), 1u);
}

// Pages of the write in flight reach the disk in any order: a sector that never made it reads as
// zeros even when later ones did.
TEST_F(WalTest, CompleteLastRecordWithAnUnwrittenSectorIsATornWrite) {
  fs::path segment;
  std::uintmax_t before_last = 0;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    segment = d->wal->segment_path();
    before_last = fs::file_size(segment);
    ASSERT_TRUE(d->store.put_if("/b", 0, std::string(3000, 'b')));
  }
  std::string torn = read_bytes(segment);
  const std::size_t sector = (before_last / 512 + 2) * 512;
  std::fill(torn.begin() + static_cast<std::ptrdiff_t>(sector),
            torn.begin() + static_cast<std::ptrdiff_t>(sector + 512), '\0');
  write_bytes(segment, torn);
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.current_revision(), 2);
  EXPECT_EQ(d->store.get("/b").error(), Errc::not_found);
  ASSERT_EQ(torn_copies(dir_).size(), 1u);
  EXPECT_EQ(read_bytes(torn_copies(dir_)[0]), torn);
}

TEST_F(WalTest, CorruptRecordFollowedByGoodRecordsRefusesToOpen) {
  fs::path segment;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    ASSERT_TRUE(d->store.put_if("/b", 0, "second"));
    segment = d->wal->segment_path();
  }
  std::string bad = read_bytes(segment);
  bad[8 + 8 + 1] = static_cast<char>(bad[8 + 8 + 1] ^ 1);  // inside the first payload
  write_bytes(segment, bad);
  auto d = Durable::open(options());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error(), Errc::corrupt);
}

TEST_F(WalTest, TrailingZerosAfterTheLastRecordAreCut) {
  fs::path segment;
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "first"));
    segment = d->wal->segment_path();
  }
  const std::string original = read_bytes(segment) + std::string(100, '\0');
  write_bytes(segment, original);
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.get("/a")->value, "first");
  ASSERT_EQ(torn_copies(dir_).size(), 1u);
  EXPECT_EQ(read_bytes(torn_copies(dir_)[0]), original);
  ASSERT_TRUE(d->store.put_if("/b", 0, "second"));
  d.reset();
  d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.current_revision(), 3);
}

TEST_F(WalTest, SnapshotKeepsOnePreviousGenerationAndRestartReplaysTheLogAfterIt) {
  auto o = options();
  o.snapshot_log_records = 4;
  MvccStore expected;
  {
    auto d = open_ok(o);
    ASSERT_TRUE(d);
    for (int i = 0; i < 10; ++i) {
      const std::string key = "/k" + std::to_string(i % 3);
      for (MvccStore* s : {&d->store, &expected}) {
        auto cur = s->get(key);
        ASSERT_TRUE(s->put_if(key, cur ? cur->mod_revision : 0, "v" + std::to_string(i)));
      }
    }
    ASSERT_TRUE(d->store.delete_if("/k0"));
    ASSERT_TRUE(expected.delete_if("/k0"));
    // Snapshots 2 and 3 and the segments from 2 on: the newest generation and the one before.
    EXPECT_EQ(files_with(dir_, ".snap").size(), 2u);
    EXPECT_EQ(files_with(dir_, ".log").size(), 2u);
    EXPECT_FALSE(fs::exists(dir_ / "wal-0000000000000001.log"));
    EXPECT_LT(d->wal->log_records(), 4u);
  }
  auto d = open_ok(o);
  ASSERT_TRUE(d);
  expect_same_state(d->store, expected);
  EXPECT_EQ(d->store.current_revision(), 12);
  // History before the snapshot is treated as compacted.
  EXPECT_GE(d->store.compacted_revision(), 9);
  EXPECT_EQ(d->store.read_events("/", 2, 100).error(), Errc::gone);
  EXPECT_EQ(d->store.get("/k1", 3).error(), Errc::gone);
}

TEST_F(WalTest, CompactionSurvivesRestart) {
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "1"));
    ASSERT_TRUE(d->store.put_if("/a", 2, "2"));
    ASSERT_TRUE(d->store.put_if("/a", 3, "3"));
    ASSERT_TRUE(d->store.compact(3));
  }
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.compacted_revision(), 3);
  EXPECT_EQ(d->store.get("/a", 2).error(), Errc::gone);
  EXPECT_EQ(d->store.get("/a", 3)->value, "2");
  EXPECT_EQ(d->store.get("/a")->value, "3");
}

TEST_F(WalTest, UnfinishedSnapshotTempFileIsIgnoredAndRemoved) {
  {
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->store.put_if("/a", 0, "1"));
  }
  write_bytes(dir_ / "snap-0000000000000002.tmp", "half a snapshot");
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.get("/a")->value, "1");
  EXPECT_FALSE(fs::exists(dir_ / "snap-0000000000000002.tmp"));
}

void damage(const fs::path& p) {
  std::string bad = read_bytes(p);
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 1);
  write_bytes(p, bad);
}

// Makes `writes` writes to five keys through `d` (opened with a snapshot threshold), mirrored in
// `expected`.
void write_with_snapshots(std::unique_ptr<Durable> d, MvccStore& expected, int writes) {
  ASSERT_TRUE(d);
  for (int i = 0; i < writes; ++i) {
    const std::string key = "/k" + std::to_string(i % 5);
    for (MvccStore* s : {&d->store, &expected}) {
      auto cur = s->get(key);
      ASSERT_TRUE(s->put_if(key, cur ? cur->mod_revision : 0, "v" + std::to_string(i)));
    }
  }
}

TEST_F(WalTest, DamagedNewestSnapshotFallsBackToThePreviousOneAndLosesNothing) {
  auto o = options();
  o.snapshot_log_records = 3;
  MvccStore expected;
  write_with_snapshots(open_ok(o), expected, 14);
  auto snaps = files_with(dir_, ".snap");
  ASSERT_EQ(snaps.size(), 2u);
  damage(snaps.back());
  {
    LogCapture log;
    auto d = open_ok(o);
    ASSERT_TRUE(d);
    expect_same_state(d->store, expected);
    EXPECT_NE(log.text().find("FALLING BACK to " + snaps.front().string()), std::string::npos)
        << log.text();
    // The damaged file is kept aside, not deleted, and no longer counts as a snapshot.
    EXPECT_FALSE(fs::exists(snaps.back()));
    EXPECT_EQ(files_with(dir_, ".snap").size(), 1u);
    bool kept = false;
    for (const auto& e : fs::directory_iterator(dir_)) {
      kept = kept || e.path().filename().string().starts_with(snaps.back().filename().string() +
                                                              ".damaged-");
    }
    EXPECT_TRUE(kept);
    // Writing on, and through more snapshots, works from the recovered state.
    for (MvccStore* s : {&d->store, &expected}) ASSERT_TRUE(s->put_if("/after", 0, "x"));
  }
  auto d = open_ok(o);
  ASSERT_TRUE(d);
  expect_same_state(d->store, expected);
}

TEST_F(WalTest, DamagedFirstSnapshotFallsBackToTheEmptyStoreAndTheWholeLog) {
  auto o = options();
  o.snapshot_log_records = 3;
  MvccStore expected;
  write_with_snapshots(open_ok(o), expected, 5);
  auto snaps = files_with(dir_, ".snap");
  ASSERT_EQ(snaps.size(), 1u);
  damage(snaps[0]);
  auto d = open_ok(o);
  ASSERT_TRUE(d);
  expect_same_state(d->store, expected);
}

TEST_F(WalTest, DamagedNewestAndPreviousSnapshotsRefuseToOpenAndChangeNothing) {
  auto o = options();
  o.snapshot_log_records = 3;
  MvccStore expected;
  write_with_snapshots(open_ok(o), expected, 14);
  auto snaps = files_with(dir_, ".snap");
  ASSERT_EQ(snaps.size(), 2u);
  damage(snaps[0]);
  damage(snaps[1]);
  expect_refused_and_unchanged();
}

TEST_F(WalTest, DamagedNewestSnapshotWithoutTheLogSinceThePreviousOneRefusesToOpen) {
  auto o = options();
  o.snapshot_log_records = 3;
  MvccStore expected;
  write_with_snapshots(open_ok(o), expected, 14);
  auto snaps = files_with(dir_, ".snap");
  auto logs = files_with(dir_, ".log");
  ASSERT_EQ(snaps.size(), 2u);
  ASSERT_EQ(logs.size(), 2u);
  damage(snaps[1]);
  fs::remove(logs[0]);  // the fallback needs the records between the two snapshots
  expect_refused_and_unchanged();
}

TEST_F(WalTest, DataDirectoryIsCreatedPrivateAndEveryFileIsOwnerOnly) {
  const mode_t old_umask = ::umask(022);
  auto o = options();
  o.dir = dir_ / "parent" / "data";
  o.snapshot_log_records = 2;
  {
    auto d = open_ok(o);
    ASSERT_TRUE(d);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(d->store.put_if("/k" + std::to_string(i), 0, "v"));
  }
  ::umask(old_umask);
  EXPECT_EQ(permissions_of(o.dir), 0700u);
  ASSERT_FALSE(files_with(o.dir, ".snap").empty());
  for (const auto& e : fs::directory_iterator(o.dir)) {
    EXPECT_EQ(permissions_of(e.path()), 0600u) << e.path();
  }
}

TEST_F(WalTest, ExistingDirectoryOpenToOthersIsWarnedAboutButNotChmodded) {
  fs::permissions(dir_, fs::perms(0755));
  LogCapture log;
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(permissions_of(dir_), 0755u);
  EXPECT_NE(log.text().find("accessible by group or others"), std::string::npos) << log.text();
}

TEST_F(WalTest, CrashBetweenSnapshotAndNewSegmentLosesNothing) {
  auto o = options();
  o.snapshot_log_records = 3;
  {
    auto d = open_ok(o);
    ASSERT_TRUE(d);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(d->store.put_if("/k" + std::to_string(i), 0, "v"));
  }
  // The 4th write triggered a snapshot at revision 4 and went into a fresh segment. Removing
  // that segment simulates a crash right after the snapshot was renamed into place.
  auto logs = files_with(dir_, ".log");
  ASSERT_EQ(logs.size(), 2u);
  fs::remove(logs.back());
  auto d = open_ok(o);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.current_revision(), 4);
  EXPECT_TRUE(d->store.get("/k2"));
  ASSERT_TRUE(d->store.put_if("/k3", 0, "v"));
  d.reset();
  d = open_ok(o);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.get("/k3")->mod_revision, 5);
}

}  // namespace
}  // namespace kwatch::storage
