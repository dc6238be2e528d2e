#include "schema/managed_fields.hpp"

#include "schema/builtin_schemas.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::schema {

using base::Errc;

namespace {

namespace json = boost::json;

FieldManagerScope scope(std::string now = "2026-01-01T00:00:00Z", std::string subresource = "") {
  static const auto types = FieldTypes::of_resource(
      *KindSchemas::builtin().structural_schema("apps", "v1", "Deployment"));
  FieldManagerScope s;
  s.type = &types->root();
  s.api_version = "apps/v1";
  s.subresource = std::move(subresource);
  s.reset.insert({field_step(s.subresource == "status" ? "spec" : "status")});
  s.now = std::move(now);
  return s;
}

json::object obj(std::string_view text) { return json::parse(text).as_object(); }

const json::array& managed(const json::object& o) {
  return o.at("metadata").at("managedFields").as_array();
}

std::string fields(const json::object& o, std::size_t i) {
  return json::serialize(managed(o).at(i).at("fieldsV1"));
}

constexpr const char* kDeployment =
    R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"app":"x"}},
        "spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"c","image":"i:1"}]}}}})";

json::object applied(const json::object* live, std::string_view config, const std::string& manager,
                     bool force = false, FieldManagerScope s = scope()) {
  auto r = apply_configuration(live, obj(config), manager, force, s);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : json::object();
}

TEST(ManagedFields, CreateRecordsEverythingTheWriterSet) {
  json::object d = obj(kDeployment);
  track_update(nullptr, d, "kubectl-create", scope());
  ASSERT_EQ(managed(d).size(), 1u);
  const json::object& e = managed(d)[0].as_object();
  EXPECT_EQ(e.at("manager"), "kubectl-create");
  EXPECT_EQ(e.at("operation"), "Update");
  EXPECT_EQ(e.at("apiVersion"), "apps/v1");
  EXPECT_EQ(e.at("time"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(e.at("fieldsType"), "FieldsV1");
  EXPECT_EQ(fields(d, 0),
            R"({"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:replicas":{},)"
            R"("f:template":{".":{},"f:spec":{".":{},"f:containers":{".":{},)"
            R"("k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:name":{}}}}}}})");
}

TEST(ManagedFields, UpdatesTakeChangedFieldsAndDropRemovedOnes) {
  json::object d = obj(kDeployment);
  track_update(nullptr, d, "creator", scope());
  json::object next = d;
  next["spec"].as_object()["replicas"] = 3;
  next["metadata"].as_object()["labels"].as_object().erase("app");
  track_update(&d, next, "scaler", scope("2026-01-01T00:00:05Z"));
  ASSERT_EQ(managed(next).size(), 2u);
  EXPECT_EQ(managed(next)[1].at("manager"), "scaler");
  EXPECT_EQ(fields(next, 1), R"({"f:spec":{"f:replicas":{}}})");
  EXPECT_EQ(fields(next, 0).find("f:replicas"), std::string::npos);
  EXPECT_EQ(fields(next, 0).find("f:app"), std::string::npos);
  // An update that changes nothing leaves the record (and its times) alone.
  json::object again = next;
  track_update(&next, again, "other", scope("2026-01-01T00:00:09Z"));
  EXPECT_EQ(again.at("metadata").at("managedFields"), next.at("metadata").at("managedFields"));
}

TEST(ManagedFields, AWriteThatMovesNoOwnershipKeepsTheStoredEntries) {
  json::object d = obj(kDeployment);
  track_update(nullptr, d, "creator", scope());
  const json::value stored = d.at("metadata").at("managedFields");
  auto replicas = [&](const json::object& from, int n, bool keep_managed_fields) {
    json::object next = from;
    next["spec"].as_object()["replicas"] = n;
    if (!keep_managed_fields) next["metadata"].as_object().erase("managedFields");
    return next;
  };
  // The same manager changing a field it owns within the same second: nothing moves, whether
  // the request sends the entries back or leaves them out.
  for (bool echo : {true, false}) {
    json::object next = replicas(d, 2, echo);
    track_update(&d, next, "creator", scope());
    EXPECT_EQ(next.at("metadata").at("managedFields"), stored) << echo;
  }
  // A second later the entry's time moves.
  json::object later = replicas(d, 3, false);
  track_update(&d, later, "creator", scope("2026-01-01T00:00:07Z"));
  ASSERT_EQ(managed(later).size(), 1u);
  EXPECT_EQ(managed(later)[0].at("time"), "2026-01-01T00:00:07Z");
  EXPECT_EQ(fields(later, 0), fields(d, 0));
  // A removed field leaves its owner's entry, at any time.
  json::object unlabeled = d;
  unlabeled["metadata"].as_object()["labels"].as_object().erase("app");
  track_update(&d, unlabeled, "creator", scope());
  EXPECT_EQ(fields(unlabeled, 0).find("f:app"), std::string::npos);
  // Another manager taking the field: a second entry.
  json::object scaled = replicas(d, 4, true);
  track_update(&d, scaled, "scaler", scope());
  ASSERT_EQ(managed(scaled).size(), 2u);
  EXPECT_EQ(managed(scaled)[1].at("manager"), "scaler");
  EXPECT_EQ(fields(scaled, 1), R"({"f:spec":{"f:replicas":{}}})");
}

TEST(ManagedFields, EmptyListClearsAndUntrackedObjectsStayUntracked) {
  json::object d = obj(kDeployment);
  track_update(nullptr, d, "creator", scope());
  json::object cleared = d;
  cleared["metadata"].as_object()["managedFields"] = json::array();
  cleared["spec"].as_object()["replicas"] = 2;
  track_update(&d, cleared, "u", scope());
  EXPECT_FALSE(cleared.at("metadata").as_object().contains("managedFields"));
  json::object next = cleared;
  next["spec"].as_object()["replicas"] = 4;
  track_update(&cleared, next, "u", scope());
  EXPECT_FALSE(next.at("metadata").as_object().contains("managedFields"));
  // Invalid managedFields in a body keep the stored ones.
  json::object bad = d;
  bad["metadata"].as_object()["managedFields"] = json::parse(R"([{"manager":"x","operation":"Nope"}])");
  track_update(&d, bad, "u", scope());
  EXPECT_EQ(bad.at("metadata").at("managedFields"), d.at("metadata").at("managedFields"));
}

TEST(ManagedFields, ApplyOwnsExactlyTheConfiguration) {
  json::object d = applied(nullptr, kDeployment, "ssa");
  ASSERT_EQ(managed(d).size(), 1u);
  EXPECT_EQ(managed(d)[0].at("operation"), "Apply");
  EXPECT_EQ(fields(d, 0),
            R"({"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},)"
            R"("f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},)"
            R"("f:image":{},"f:name":{}}}}}}})");
  // The same configuration again changes nothing, not even the time.
  json::object again = applied(&d, kDeployment, "ssa", false, scope("2026-02-02T00:00:00Z"));
  EXPECT_EQ(again, d);
}

TEST(ManagedFields, ConflictsNameManagersAndFieldsUnlessForced) {
  json::object d = applied(nullptr, kDeployment, "ssa");
  json::object scaled = d;
  scaled["spec"].as_object()["replicas"] = 5;
  track_update(&d, scaled, "hpa", scope("2026-01-01T00:01:00Z", "scale"));
  auto r = apply_configuration(&scaled, obj(kDeployment), "ssa", false, scope());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::conflict);
  EXPECT_EQ(r.error().message,
            "Apply failed with 1 conflict: conflict with \"hpa\" with subresource \"scale\" using "
            "apps/v1: .spec.replicas");
  ASSERT_EQ(r.error().causes.size(), 1u);
  EXPECT_EQ(r.error().causes[0].type, "FieldManagerConflict");
  EXPECT_EQ(r.error().causes[0].field, ".spec.replicas");
  // Two managers, two fields.
  json::object relabeled = scaled;
  relabeled["metadata"].as_object()["labels"].as_object()["app"] = "y";
  track_update(&scaled, relabeled, "labeler", scope("2026-01-01T00:02:00Z"));
  auto two = apply_configuration(&relabeled, obj(kDeployment), "ssa", false, scope());
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().message,
            "Apply failed with 2 conflicts: conflicts with \"hpa\" with subresource \"scale\" using "
            "apps/v1:\n- .spec.replicas\nconflicts with \"labeler\" using apps/v1:\n- "
            ".metadata.labels.app");
  // Forced: the applier takes the fields, the others lose them.
  json::object forced = applied(&relabeled, kDeployment, "ssa", true);
  EXPECT_EQ(forced.at("spec").at("replicas"), 1);
  EXPECT_EQ(managed(forced).size(), 1u);
  // The same value is no conflict: both own it.
  json::object shared = applied(&scaled, R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"d"},"spec":{"replicas":5}})", "other");
  EXPECT_EQ(managed(shared).size(), 3u);
}

TEST(ManagedFields, FieldsNoLongerAppliedAreRemovedUnlessSomeoneElseOwnsThem) {
  json::object d = applied(nullptr, kDeployment, "ssa");
  json::object labeled = d;
  labeled["metadata"].as_object()["labels"].as_object()["team"] = "t";
  track_update(&d, labeled, "labeler", scope());
  const char* smaller =
      R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
          "spec":{"template":{"spec":{"containers":[{"name":"c","image":"i:1"}]}}}})";
  json::object out = applied(&labeled, smaller, "ssa");
  EXPECT_FALSE(out.at("spec").as_object().contains("replicas"));
  EXPECT_EQ(out.at("metadata").at("labels"), json::parse(R"({"team":"t"})"));
  EXPECT_EQ(out.at("metadata").at("name"), "d");
  // A field another manager also set stays when the applier lets go of it.
  json::object co = applied(&d, R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
                                    "spec":{"replicas":1}})", "co");
  json::object kept = applied(&co, smaller, "ssa");
  EXPECT_EQ(kept.at("spec").at("replicas"), 1);
}

TEST(ManagedFields, KubectlTakesOverFromClientSideApply) {
  json::object csa = obj(kDeployment);
  csa["metadata"].as_object()["annotations"] = json::object{
      {"kubectl.kubernetes.io/last-applied-configuration", json::serialize(json::parse(kDeployment))}};
  track_update(nullptr, csa, "kubectl-client-side-apply", scope());
  std::string changed = kDeployment;
  changed.replace(changed.find("\"replicas\":1"), 12, "\"replicas\":2");
  // Another manager meets a conflict; kubectl's server-side apply does not.
  EXPECT_FALSE(apply_configuration(&csa, obj(changed), "someone", false, scope()));
  json::object out = applied(&csa, changed, "kubectl");
  EXPECT_EQ(out.at("spec").at("replicas"), 2);
  // ...and keeps the annotation in step with what it applied.
  auto recorded = json::parse(
      out.at("metadata").at("annotations").at("kubectl.kubernetes.io/last-applied-configuration").as_string());
  EXPECT_EQ(recorded.at("spec").at("replicas"), 2);
}

TEST(ManagedFields, ApplyRefusesOtherVersionsManagedFieldsAndBadLists) {
  auto wrong = apply_configuration(nullptr, obj(R"({"apiVersion":"apps/v1beta1","kind":"Deployment"})"),
                                   "m", false, scope());
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message,
            "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, "
            "expected: apps/v1");
  auto mf = apply_configuration(nullptr, obj(R"({"apiVersion":"apps/v1","kind":"Deployment",
                                                 "metadata":{"managedFields":[]}})"),
                                "m", false, scope());
  ASSERT_FALSE(mf);
  EXPECT_EQ(mf.error().message, "metadata.managedFields must be nil");
  auto dup = apply_configuration(nullptr, obj(R"({"apiVersion":"apps/v1","kind":"Deployment",
      "spec":{"template":{"spec":{"containers":[{"name":"a"},{"name":"a"}]}}}})"), "m", false, scope());
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, Errc::bad_request);
}

TEST(ManagedFields, StatusIsNotTheMainResourcesToOwn) {
  json::object d = applied(nullptr, R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"d"},"spec":{"replicas":1},"status":{"replicas":9}})", "ssa");
  EXPECT_EQ(fields(d, 0), R"({"f:spec":{"f:replicas":{}}})");
  json::object s = d;
  s["status"].as_object()["replicas"] = 1;
  track_update(&d, s, "controller", scope("2026-01-01T00:00:00Z", "status"));
  EXPECT_EQ(managed(s)[1].at("subresource"), "status");
  EXPECT_EQ(fields(s, 1), R"({"f:status":{"f:replicas":{}}})");
}

TEST(ManagedFields, AtMostTenUpdateManagers) {
  json::object d = obj(kDeployment);
  track_update(nullptr, d, "m0", scope("2026-01-01T00:00:00Z"));
  for (int i = 1; i <= 12; ++i) {
    json::object next = d;
    next["metadata"].as_object()["labels"].as_object()["k" + std::to_string(i)] = "v";
    char when[32];
    std::snprintf(when, sizeof when, "2026-01-01T00:00:%02dZ", i);
    track_update(&d, next, "m" + std::to_string(i), scope(when));
    d = std::move(next);
  }
  const json::array& entries = managed(d);
  EXPECT_EQ(entries.size(), 10u);
  EXPECT_EQ(entries[0].at("manager"), "ancient-changes");
  EXPECT_EQ(entries.back().at("manager"), "m12");
}

TEST(ManagedFields, ManagerNames) {
  EXPECT_EQ(manager_from_user_agent("kubectl/v1.32.0 (linux/amd64) kubernetes/abc"), "kubectl");
  EXPECT_EQ(manager_from_user_agent("a\tb/1"), "ab");
  EXPECT_EQ(manager_from_user_agent(std::string(300, 'x')).size(), 128u);
  EXPECT_FALSE(check_field_manager("kubectl", true, "PatchOptions"));
  auto missing = check_field_manager("", true, "PatchOptions");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required "
            "for apply patch");
  EXPECT_TRUE(check_field_manager(std::string(129, 'x'), false, "CreateOptions"));
  EXPECT_TRUE(check_field_manager("a\nb", false, "UpdateOptions"));
}

}  // namespace
}  // namespace kwatch::schema
