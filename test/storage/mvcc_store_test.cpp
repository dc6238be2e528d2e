#include "storage/mvcc_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kwatch::storage {
namespace {

TEST(MvccStore, EmptyStoreIsAtRevisionOneAndFirstWriteGetsTwo) {
  MvccStore store;
  EXPECT_EQ(store.current_revision(), 1);
  auto r = store.put_if("/a", 0, "v1");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->succeeded);
  EXPECT_EQ(r->revision, 2);
  EXPECT_EQ(r->kv.key, "/a");
  EXPECT_EQ(r->kv.value, "v1");
  EXPECT_EQ(r->kv.create_revision, 2);
  EXPECT_EQ(r->kv.mod_revision, 2);
  EXPECT_EQ(r->kv.version, 1);
  EXPECT_EQ(store.current_revision(), 2);
}

TEST(MvccStore, UpdateKeepsCreateRevisionAndIncrementsVersion) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v1"));
  ASSERT_TRUE(store.put_if("/b", 0, "x"));
  auto r = store.put_if("/a", 2, "v2");
  ASSERT_TRUE(r && r->succeeded);
  EXPECT_EQ(r->kv.create_revision, 2);
  EXPECT_EQ(r->kv.mod_revision, 4);
  EXPECT_EQ(r->kv.version, 2);
  auto got = store.get("/a");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->value, "v2");
  EXPECT_EQ(got->mod_revision, 4);
}

TEST(MvccStore, UpdateWithStaleModRevisionFailsAndReturnsCurrentState) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v1"));
  ASSERT_TRUE(store.put_if("/a", 2, "v2"));
  auto r = store.put_if("/a", 2, "v3");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->succeeded);
  EXPECT_EQ(r->kv.value, "v2");
  EXPECT_EQ(r->kv.mod_revision, 3);
  EXPECT_EQ(r->revision, 3);
  EXPECT_EQ(store.current_revision(), 3);
}

TEST(MvccStore, CreateOfExistingKeyFailsWithCurrentState) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v1"));
  auto r = store.put_if("/a", 0, "other");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->succeeded);
  EXPECT_EQ(r->kv.value, "v1");
}

TEST(MvccStore, UpdateOfAbsentKeyFailsWithModRevisionZero) {
  MvccStore store;
  auto r = store.put_if("/a", 5, "v");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->succeeded);
  EXPECT_EQ(r->kv.mod_revision, 0);
  EXPECT_EQ(store.current_revision(), 1);
}

TEST(MvccStore, DeleteLeavesTombstoneAndOldRevisionsStayReadable) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v1"));  // 2
  auto d = store.delete_if("/a");            // 3
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->succeeded);
  EXPECT_EQ(d->revision, 3);
  EXPECT_EQ(d->kv.value, "v1");
  EXPECT_EQ(d->kv.mod_revision, 2);
  EXPECT_EQ(store.get("/a").error(), Errc::not_found);
  auto old = store.get("/a", 2);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->value, "v1");
  EXPECT_EQ(store.get("/a", 1).error(), Errc::not_found);
  EXPECT_EQ(store.size(), 0u);
}

TEST(MvccStore, DeleteOfAbsentKeyIsNotAnErrorAndWritesNothing) {
  MvccStore store;
  auto d = store.delete_if("/nope");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->succeeded);
  EXPECT_EQ(d->kv.mod_revision, 0);
  EXPECT_EQ(store.current_revision(), 1);
}

TEST(MvccStore, GuardedDeleteWithStaleModRevisionFails) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v1"));
  ASSERT_TRUE(store.put_if("/a", 2, "v2"));
  auto d = store.delete_if("/a", 2);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->succeeded);
  EXPECT_EQ(d->kv.mod_revision, 3);
  EXPECT_TRUE(store.get("/a"));
  auto ok = store.delete_if("/a", 3);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->succeeded);
}

TEST(MvccStore, RecreateAfterDeleteResetsCreateRevisionAndVersion) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v1"));  // 2
  ASSERT_TRUE(store.put_if("/a", 2, "v2"));  // 3
  ASSERT_TRUE(store.delete_if("/a"));        // 4
  auto r = store.put_if("/a", 0, "again");   // 5
  ASSERT_TRUE(r && r->succeeded);
  EXPECT_EQ(r->kv.create_revision, 5);
  EXPECT_EQ(r->kv.version, 1);
  auto at3 = store.get("/a", 3);
  ASSERT_TRUE(at3);
  EXPECT_EQ(at3->version, 2);
  EXPECT_EQ(at3->create_revision, 2);
}

TEST(MvccStore, ReadAtFutureRevisionIsBadRequest) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v"));
  EXPECT_EQ(store.get("/a", 3).error(), Errc::bad_request);
  ListOptions o;
  o.revision = 9;
  EXPECT_EQ(store.range(o).error(), Errc::bad_request);
}

TEST(MvccStore, RangeReturnsPrefixInKeyOrderAtThePastRevision) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/pods/b", 0, "b"));  // 2
  ASSERT_TRUE(store.put_if("/pods/a", 0, "a"));  // 3
  ASSERT_TRUE(store.put_if("/podsx", 0, "x"));   // 4
  ASSERT_TRUE(store.put_if("/pods/c", 0, "c"));  // 5
  ASSERT_TRUE(store.delete_if("/pods/a"));       // 6
  ListOptions o;
  o.prefix = "/pods/";
  auto now = store.range(o);
  ASSERT_TRUE(now);
  EXPECT_EQ(now->revision, 6);
  ASSERT_EQ(now->kvs.size(), 2u);
  EXPECT_EQ(now->kvs[0].key, "/pods/b");
  EXPECT_EQ(now->kvs[1].key, "/pods/c");
  EXPECT_EQ(now->count, 2);
  EXPECT_FALSE(now->more);

  o.revision = 4;
  auto past = store.range(o);
  ASSERT_TRUE(past);
  EXPECT_EQ(past->revision, 4);
  ASSERT_EQ(past->kvs.size(), 2u);
  EXPECT_EQ(past->kvs[0].key, "/pods/a");
  EXPECT_EQ(past->kvs[1].key, "/pods/b");
}

TEST(MvccStore, RangeWithLimitSetsMoreAndCountsEverythingFromStartKey) {
  MvccStore store;
  for (char c = 'a'; c <= 'e'; ++c) {
    ASSERT_TRUE(store.put_if(std::string("/k/") + c, 0, std::string(1, c)));
  }
  ListOptions o;
  o.prefix = "/k/";
  o.limit = 2;
  auto page1 = store.range(o);
  ASSERT_TRUE(page1);
  ASSERT_EQ(page1->kvs.size(), 2u);
  EXPECT_TRUE(page1->more);
  EXPECT_EQ(page1->count, 5);
  EXPECT_EQ(page1->kvs[1].key, "/k/b");

  o.start_key = page1->kvs.back().key + '\0';
  o.revision = page1->revision;
  auto page2 = store.range(o);
  ASSERT_TRUE(page2);
  ASSERT_EQ(page2->kvs.size(), 2u);
  EXPECT_EQ(page2->kvs[0].key, "/k/c");
  EXPECT_EQ(page2->count, 3);
  EXPECT_TRUE(page2->more);

  o.start_key = "/k/e";
  auto last = store.range(o);
  ASSERT_TRUE(last);
  ASSERT_EQ(last->kvs.size(), 1u);
  EXPECT_FALSE(last->more);

  ListOptions count;
  count.prefix = "/k/";
  count.count_only = true;
  auto c = store.range(count);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->kvs.empty());
  EXPECT_EQ(c->count, 5);
}

TEST(MvccStore, CompactionMakesOlderRevisionsGoneButKeepsTheCompactedOne) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "v1"));  // 2
  ASSERT_TRUE(store.put_if("/a", 2, "v2"));  // 3
  ASSERT_TRUE(store.put_if("/b", 0, "b"));   // 4
  ASSERT_TRUE(store.delete_if("/b"));        // 5
  ASSERT_TRUE(store.put_if("/a", 3, "v3"));  // 6
  ASSERT_TRUE(store.compact(5));
  EXPECT_EQ(store.compacted_revision(), 5);
  EXPECT_EQ(store.get("/a", 4).error(), Errc::gone);
  auto at5 = store.get("/a", 5);
  ASSERT_TRUE(at5);
  EXPECT_EQ(at5->value, "v2");
  EXPECT_EQ(store.get("/b", 5).error(), Errc::not_found);
  EXPECT_EQ(store.get("/a")->value, "v3");
  ListOptions o;
  o.revision = 3;
  EXPECT_EQ(store.range(o).error(), Errc::gone);
  EXPECT_EQ(store.compact(5).error(), Errc::gone);
  EXPECT_EQ(store.compact(7).error(), Errc::bad_request);
}

TEST(MvccStore, EventsFromARevisionCarryPrevKvAndFilterByPrefix) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/w/a", 0, "1"));  // 2
  ASSERT_TRUE(store.put_if("/x/a", 0, "x"));  // 3
  ASSERT_TRUE(store.put_if("/w/a", 2, "2"));  // 4
  ASSERT_TRUE(store.delete_if("/w/a"));       // 5
  auto read = store.read_events("/w/", 3, 100);
  ASSERT_TRUE(read);
  ASSERT_EQ(read->events.size(), 2u);
  const Event& upd = read->events[0];
  EXPECT_EQ(upd.type, EventType::put);
  EXPECT_EQ(upd.revision(), 4);
  EXPECT_EQ(upd.kv.value, "2");
  ASSERT_TRUE(upd.prev_kv);
  EXPECT_EQ(upd.prev_kv->value, "1");
  EXPECT_EQ(upd.prev_kv->mod_revision, 2);
  const Event& del = read->events[1];
  EXPECT_EQ(del.type, EventType::del);
  EXPECT_EQ(del.kv.key, "/w/a");
  EXPECT_EQ(del.kv.mod_revision, 5);
  EXPECT_TRUE(del.kv.value.empty());
  ASSERT_TRUE(del.prev_kv);
  EXPECT_EQ(del.prev_kv->value, "2");
  EXPECT_EQ(read->next_revision, 6);

  auto all = store.read_events("", 1, 100);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->events.size(), 4u);
  EXPECT_FALSE(all->events[0].prev_kv);
}

TEST(MvccStore, EventReadsStopAtTheBatchLimitAndResume) {
  MvccStore store;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store.put_if("/k" + std::to_string(i), 0, "v"));
  auto first = store.read_events("/", 2, 4);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->events.size(), 4u);
  EXPECT_EQ(first->next_revision, 6);
  auto rest = store.read_events("/", first->next_revision, 100);
  ASSERT_TRUE(rest);
  ASSERT_EQ(rest->events.size(), 6u);
  EXPECT_EQ(rest->events.front().revision(), 6);
}

TEST(MvccStore, EventReadsStopAtTheScanBudgetAndReportWhereToResume) {
  MvccStore store;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store.put_if("/other" + std::to_string(i), 0, "v"));
  ASSERT_TRUE(store.put_if("/w/a", 0, "v"));  // 12
  auto first = store.read_events("/w/", 2, 100, 4);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->events.empty());
  EXPECT_EQ(first->next_revision, 6);
  EXPECT_EQ(first->current_revision, 12);
  auto rest = store.read_events("/w/", first->next_revision, 100);
  ASSERT_TRUE(rest);
  ASSERT_EQ(rest->events.size(), 1u);
  EXPECT_EQ(rest->next_revision, 13);
}

TEST(MvccStore, EventReadsAtOrBelowTheCompactedRevisionAreGone) {
  MvccStore store;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(store.put_if("/k" + std::to_string(i), 0, "v"));
  ASSERT_TRUE(store.compact(4));
  EXPECT_EQ(store.read_events("/", 4, 10).error(), Errc::gone);
  EXPECT_EQ(store.read_events("/", 2, 10).error(), Errc::gone);
  auto after = store.read_events("/", 5, 10);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->events.size(), 1u);
  EXPECT_EQ(after->events[0].revision(), 5);
}

TEST(MvccStore, FailingCommitHookLeavesTheStoreUnchanged) {
  MvccStore store;
  store.set_commit_hook([](const Mutation&) -> Result<void> { return Errc::internal; });
  EXPECT_EQ(store.put_if("/a", 0, "v").error(), Errc::internal);
  EXPECT_EQ(store.current_revision(), 1);
  EXPECT_EQ(store.get("/a").error(), Errc::not_found);
}

TEST(MvccStore, ListenersSeeEveryCommitInRevisionOrder) {
  MvccStore store;
  std::vector<std::int64_t> seen;
  auto id = store.add_commit_listener([&](const Mutation& m) { seen.push_back(m.revision); });
  ASSERT_TRUE(store.put_if("/a", 0, "v"));
  ASSERT_TRUE(store.delete_if("/a"));
  ASSERT_TRUE(store.delete_if("/a"));  // absent: no commit
  store.remove_commit_listener(id);
  ASSERT_TRUE(store.put_if("/a", 0, "v"));
  EXPECT_EQ(seen, (std::vector<std::int64_t>{2, 3}));
}

TEST(MvccStore, ConcurrentCompareAndSwapIncrementsLoseNoUpdate) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/counter", 0, "0"));
  constexpr int kThreads = 4;
  constexpr int kIncrements = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        auto cur = store.get("/counter");
        auto r =
            store.put_if("/counter", cur->mod_revision, std::to_string(std::stoi(cur->value) + 1));
        if (r && r->succeeded) ++i;
        ListOptions o;
        ASSERT_TRUE(store.range(o));
      }
    });
  }
  for (auto& t : threads) t.join();
  auto end = store.get("/counter");
  ASSERT_TRUE(end);
  EXPECT_EQ(end->value, std::to_string(kThreads * kIncrements));
  EXPECT_EQ(end->version, kThreads * kIncrements + 1);
}

TEST(MvccStore, ExportAndRestoreKeepRevisionsAndTreatOlderHistoryAsCompacted) {
  MvccStore store;
  ASSERT_TRUE(store.put_if("/a", 0, "1"));  // 2
  ASSERT_TRUE(store.put_if("/a", 2, "2"));  // 3
  ASSERT_TRUE(store.put_if("/b", 0, "b"));  // 4
  ASSERT_TRUE(store.delete_if("/b"));       // 5
  MvccStore copy;
  copy.restore(store.export_state());
  EXPECT_EQ(copy.current_revision(), 5);
  EXPECT_EQ(copy.compacted_revision(), 5);
  auto a = copy.get("/a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->create_revision, 2);
  EXPECT_EQ(a->mod_revision, 3);
  EXPECT_EQ(a->version, 2);
  EXPECT_EQ(copy.get("/a", 4).error(), Errc::gone);
  auto next = copy.put_if("/a", 3, "3");
  ASSERT_TRUE(next && next->succeeded);
  EXPECT_EQ(next->revision, 6);
  EXPECT_EQ(next->kv.version, 3);
}

}  // namespace
}  // namespace kwatch::storage
