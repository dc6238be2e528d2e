#include "storage/wal.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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
      auto r = d->store.put_if("/d", 0, "after recovery");
      ASSERT_TRUE(r && r->succeeded);
      EXPECT_EQ(r->revision, 4);
    }
    auto again = open_ok(options());
    ASSERT_TRUE(again);
    EXPECT_EQ(again->store.get("/d")->mod_revision, 4);
  }
}

TEST_F(WalTest, FlippedByteInLastRecordDropsOnlyThatRecord) {
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
    auto d = open_ok(options());
    ASSERT_TRUE(d);
    EXPECT_EQ(d->store.current_revision(), 3);
    EXPECT_EQ(d->store.get("/b")->value, "second");
    EXPECT_EQ(d->store.get("/c").error(), Errc::not_found);
  }
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
  write_bytes(segment, read_bytes(segment) + std::string(100, '\0'));
  auto d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.get("/a")->value, "first");
  ASSERT_TRUE(d->store.put_if("/b", 0, "second"));
  d.reset();
  d = open_ok(options());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->store.current_revision(), 3);
}

TEST_F(WalTest, SnapshotReplacesOldSegmentsAndRestartReplaysTheLogAfterIt) {
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
    EXPECT_EQ(files_with(dir_, ".snap").size(), 1u);
    EXPECT_EQ(files_with(dir_, ".log").size(), 1u);
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

TEST_F(WalTest, CorruptSnapshotRefusesToOpen) {
  auto o = options();
  o.snapshot_log_records = 2;
  {
    auto d = open_ok(o);
    ASSERT_TRUE(d);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(d->store.put_if("/k" + std::to_string(i), 0, "v"));
  }
  auto snaps = files_with(dir_, ".snap");
  ASSERT_EQ(snaps.size(), 1u);
  std::string bad = read_bytes(snaps[0]);
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 1);
  write_bytes(snaps[0], bad);
  auto d = Durable::open(o);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error(), Errc::corrupt);
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
  ASSERT_EQ(logs.size(), 1u);
  fs::remove(logs[0]);
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
