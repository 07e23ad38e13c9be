#!/usr/bin/env python3
"""Records a real kube-apiserver's answers to the requests the function, the CLI and the tests
send, as the fixtures in tests/fixtures/kube-apiserver/ that the conformance test replays
against the Kubernetes stand-in (tests/e2e/kube_conformance.rs).

Not used by CI: CI replays the recordings. Run it by hand against a server set up as
tests/fixtures/kube-apiserver/README.md ("Recording again") describes, with the CRDs of
tests/standins/crd/ and deploy/rbac.yaml applied:

    scripts/record-kube-apiserver.py --server https://127.0.0.1:6443 --ca ca.crt \
        --admin-token ADMIN --function-token FUNCTION [--phase main|v1.3.0]

Standard library only. The `main` phase creates the objects of `SETUP` and sends `CASES` in
order; the `v1.3.0` phase is run after Image Updater v1.3.0's CRD replaces the vendored one
and records how its schema defaults change an ImageUpdater object (`PHASE_V130`).
"""

import argparse
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "kube-apiserver")

FUNCTION_UA = "argocd-ecr-updater/0.1.0"
KUBECTL_UA = "kubectl/v1.36.2 (linux/amd64) kubernetes/standin"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
APPS = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications"
IUS = "/apis/argocd-image-updater.argoproj.io/v1alpha1/namespaces/argocd/imageupdaters"
EVENTS = "/api/v1/namespaces/argocd/events"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def application(name, team, tag, image_list=True):
    annotations = {"example.com/owner": "web"}
    if image_list:
        annotations["argocd-image-updater.argoproj.io/image-list"] = "app=r.example.com/web"
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd", "labels": {"team": team},
                     "annotations": annotations},
        "spec": {"project": "default",
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"},
                 "source": {"repoURL": "https://git.example.com/web.git", "path": "chart",
                            "helm": {"parameters": [{"name": "image.tag", "value": tag}]}}},
        "status": {"sourceType": "Helm", "summary": {"images": ["r.example.com/web:" + tag]}},
    }


def image_updater(name, images):
    return {
        "apiVersion": "argocd-image-updater.argoproj.io/v1alpha1", "kind": "ImageUpdater",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {"commonUpdateSettings": {"updateStrategy": "newest-build"},
                 "applicationRefs": [{"namePattern": "app-*", "images": images}]},
    }


# Created as `kubectl apply` creates them (its field manager), before the cases run.
SETUP = [
    {"path": "/api/v1/namespaces", "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argocd"}}},
    *[{"path": APPS, "object": application(f"app-{i:02}", "a" if i % 2 == 0 else "b", "1.0.0", i % 3 != 2)}
      for i in range(5)],
    {"path": APPS, "object": application("patch-target", "c", "1.0.0")},
    {"path": "/apis/argoproj.io/v1alpha1/namespaces/argocd/applicationsets",
     "object": {"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
                "metadata": {"name": "fleet", "namespace": "argocd"},
                "spec": {"generators": [{"list": {"elements": []}}],
                         "template": {"metadata": {"name": "x"}, "spec": {"project": "default",
                                      "destination": {"server": "https://kubernetes.default.svc"}}},
                         "ignoreApplicationDifferences": [{"jsonPointers": ["/spec/source/helm/parameters"]}]}}},
    {"path": IUS, "object": image_updater("web", [{"alias": "app", "imageName": "r.example.com/web",
                                  "commonUpdateSettings": {"allowTags": "regexp:^1[.]"}}])},
    {"path": "/api/v1/namespaces/argocd/secrets",
     "object": {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "repo-creds", "namespace": "argocd",
                             "labels": {"argocd.argoproj.io/secret-type": "repo-creds"}},
                "stringData": {"url": "https://git.example.com", "password": "hunter2"}}},
    {"path": "/api/v1/namespaces/kube-system/configmaps",
     "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "aws-auth", "namespace": "kube-system"},
                "data": {"mapRoles": "- rolearn: arn:aws:iam::768157413559:role/argocd-ecr-updater-role\n  groups: [argocd-ecr-updater]\n"}}},
]


def event(name, namespace="argocd", involved_namespace="argocd", generate=False):
    metadata = {"namespace": namespace}
    if generate:
        metadata["generateName"] = name
    else:
        metadata["name"] = name
    return {"apiVersion": "v1", "kind": "Event", "metadata": metadata,
            "involvedObject": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                               "name": "app-00", "namespace": involved_namespace},
            "reason": "ImagesUpdated", "message": "image app updated to 1.1.0", "type": "Normal",
            "source": {"component": "argocd-ecr-updater"}, "reportingComponent": "argocd-ecr-updater",
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1}


def review(kind, verb, resource, group, namespace="argocd", subresource=None, subject=False):
    attributes = {"group": group, "resource": resource, "verb": verb, "namespace": namespace}
    if subresource:
        attributes["subresource"] = subresource
    spec = {"resourceAttributes": attributes}
    if subject:
        spec["user"] = "arn:aws:sts::768157413559:assumed-role/argocd-ecr-updater-role/argocd-ecr-updater"
        spec["groups"] = ["argocd-ecr-updater"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}


def case(name, about, method, path, query=(), identity="function", accept="application/json",
         content_type=None, body=None, agent=FUNCTION_UA, continue_from=None):
    return {"name": name, "about": about, "request": {
        "identity": identity, "method": method, "path": path, "query": [list(q) for q in query],
        "headers": {k: v for k, v in {"accept": accept, "content-type": content_type,
                                      "user-agent": agent}.items() if v},
        "body": body, "continue_from": continue_from}}


CASES = [
    case("list-metadata-first-page", "the sweep's first page: metadata only, limit", "GET", APPS,
         [("limit", "2")], accept=METADATA_LIST),
    case("list-metadata-next-page", "the sweep follows continue", "GET", APPS,
         [("limit", "2"), ("continue", "")], accept=METADATA_LIST, continue_from="list-metadata-first-page"),
    case("list-metadata-label-selector", "a label selector on the sweep", "GET", APPS,
         [("limit", "500"), ("labelSelector", "team=a")], accept=METADATA_LIST),
    case("list-metadata-cluster-scope-forbidden", "ARGOCD_NAMESPACES=* with a namespaced Role",
         "GET", "/apis/argoproj.io/v1alpha1/applications", [("limit", "500")], accept=METADATA_LIST),
    case("list-metadata-cluster-scope", "ARGOCD_NAMESPACES=* as a cluster admin", "GET",
         "/apis/argoproj.io/v1alpha1/applications", [("limit", "500")], identity="admin", accept=METADATA_LIST),
    case("list-full-page", "migrate lists whole Applications", "GET", APPS, [("limit", "2")]),
    case("list-field-selector-name", "kubectl get app NAME -w lists by metadata.name", "GET", APPS,
         [("fieldSelector", "metadata.name=app-01")], identity="admin", agent=KUBECTL_UA),
    case("list-watch-forbidden", "watch=true needs the watch verb, which the Role lacks", "GET", APPS,
         [("watch", "true")]),
    case("get-application", "an Application read whole", "GET", APPS + "/app-00"),
    case("get-application-missing", "a missing Application", "GET", APPS + "/no-such-app"),
    case("get-application-metadata-only", "as=PartialObjectMetadata on a GET", "GET", APPS + "/app-00",
         accept=METADATA_ONE),
    case("get-application-table", "kubectl get's Table", "GET", APPS + "/app-00", identity="admin",
         accept=TABLE, agent=KUBECTL_UA),
    case("get-applicationset", "an owning ApplicationSet read", "GET",
         "/apis/argoproj.io/v1alpha1/namespaces/argocd/applicationsets/fleet"),
    case("get-applicationset-missing", "a missing ApplicationSet", "GET",
         "/apis/argoproj.io/v1alpha1/namespaces/argocd/applicationsets/no-such-set"),
    case("patch-merge", "a merge patch of annotations and a Helm parameter", "PATCH", APPS + "/patch-target",
         content_type=MERGE, body={"metadata": {"annotations": {"argocd-image-updater.argoproj.io/app.last": "1.1.0"}},
                                   "spec": {"source": {"helm": {"parameters": [{"name": "image.tag", "value": "1.1.0"}]}}}}),
    case("patch-json-test-passes", "a JSON patch guarded by test ops", "PATCH", APPS + "/app-01",
         content_type=JSON_PATCH, body=[
             {"op": "test", "path": "/spec/source/helm/parameters/0/value", "value": "1.0.0"},
             {"op": "replace", "path": "/spec/source/helm/parameters/0/value", "value": "1.2.0"}]),
    case("patch-json-test-fails", "a test op that fails: a race lost", "PATCH", APPS + "/app-01",
         content_type=JSON_PATCH, body=[
             {"op": "test", "path": "/spec/source/helm/parameters/0/value", "value": "1.0.0"},
             {"op": "replace", "path": "/spec/source/helm/parameters/0/value", "value": "1.3.0"}]),
    case("patch-json-replace-missing-path", "a replace of a path that is not there", "PATCH", APPS + "/app-01",
         content_type=JSON_PATCH, body=[{"op": "replace", "path": "/spec/source/kustomize/images", "value": []}]),
    case("patch-merge-stale-resource-version", "optimistic concurrency lost", "PATCH", APPS + "/app-02",
         content_type=MERGE, body={"metadata": {"resourceVersion": "1"}, "spec": {"project": "other"}}),
    case("patch-merge-unknown-field", "an unknown field is pruned with a Warning", "PATCH", APPS + "/app-02",
         content_type=MERGE, body={"spec": {"source": {"helm": {"noSuchField": True}}}}),
    case("patch-merge-unknown-field-strict", "fieldValidation=Strict refuses an unknown field", "PATCH",
         APPS + "/app-02", [("fieldValidation", "Strict")],
         content_type=MERGE, body={"spec": {"source": {"helm": {"noSuchField": True}}}}),
    case("patch-merge-schema-invalid", "a value the schema refuses", "PATCH", APPS + "/app-02",
         content_type=MERGE, body={"spec": {"source": {"helm": {"parameters": [{"name": 5, "value": "x"}]}}}}),
    case("patch-missing-application", "a patch of a missing Application", "PATCH", APPS + "/no-such-app",
         content_type=MERGE, body={"metadata": {"annotations": {"a": "b"}}}),
    case("patch-strategic-merge", "strategic merge is not served for custom resources", "PATCH",
         APPS + "/app-03", identity="admin", content_type="application/strategic-merge-patch+json",
         body={"metadata": {"annotations": {"a": "b"}}}, agent=KUBECTL_UA),
    case("patch-server-side-apply", "server-side apply by kubectl", "PATCH", APPS + "/app-03",
         [("fieldManager", "kubectl"), ("force", "true")], identity="admin",
         content_type="application/apply-patch+yaml", agent=KUBECTL_UA,
         body={"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
               "metadata": {"name": "app-03", "namespace": "argocd", "labels": {"applied": "yes"}}}),
    case("patch-kubectl-edit", "kubectl edit's merge patch", "PATCH", APPS + "/app-04",
         [("fieldManager", "kubectl-edit")], identity="admin", content_type=MERGE, agent=KUBECTL_UA,
         body={"spec": {"source": {"helm": {"parameters": [{"name": "image.tag", "value": "0.9.0"}]}}}}),
    case("patch-argocd-controller", "Argo CD's controller writing status", "PATCH", APPS + "/app-04",
         identity="admin", content_type=MERGE, agent="argocd-controller/v3.6.0 (linux/amd64)",
         body={"status": {"sync": {"status": "OutOfSync"}}}),
    case("get-after-writers", "managedFields after four writers", "GET", APPS + "/app-04"),
    case("list-metadata-after-writers", "managedFields on a metadata list", "GET", APPS,
         [("limit", "500"), ("labelSelector", "team=a")], accept=METADATA_LIST),
    case("delete-application-forbidden", "a verb the Role lacks, on an object that exists", "DELETE",
         APPS + "/app-00"),
    case("delete-missing-application-forbidden", "a verb the Role lacks, on an object that does not exist",
         "DELETE", APPS + "/no-such-app"),
    case("patch-application-status-forbidden", "a subresource the CRD does not have, and the Role does not grant",
         "PATCH", APPS + "/app-00/status", content_type=MERGE, body={"status": {}}),
    case("list-imageupdaters", "ImageUpdater objects listed whole", "GET", IUS, [("limit", "500")]),
    case("patch-imageupdater-status", "the status subresource patched", "PATCH", IUS + "/web/status",
         content_type=MERGE, body={"status": {"applicationsMatched": 2, "imagesManaged": 1}}),
    case("patch-imageupdater-spec-forbidden", "the main resource is not granted", "PATCH", IUS + "/web",
         content_type=MERGE, body={"spec": {"applicationRefs": []}}),
    case("get-imageupdater-forbidden", "get is not granted, even for a missing object", "GET", IUS + "/no-such"),
    case("create-event", "the ImagesUpdated Event", "POST", EVENTS, content_type="application/json",
         body=event("app-00.1a2b3c4d")),
    case("create-event-duplicate", "the same Event name again", "POST", EVENTS, content_type="application/json",
         body=event("app-00.1a2b3c4d")),
    case("create-event-other-namespace", "involvedObject in another namespace", "POST", EVENTS,
         content_type="application/json", body=event("app-00.99999999", involved_namespace="web")),
    case("create-event-generate-name", "generateName", "POST", EVENTS, content_type="application/json",
         body=event("app-00.", generate=True)),
    case("list-events-field-selector", "kubectl describe's Event list", "GET", EVENTS,
         [("fieldSelector", "involvedObject.name=app-00,involvedObject.namespace=argocd")], identity="admin",
         agent=KUBECTL_UA),
    case("create-events-k8s-io", "events.k8s.io/v1 is served", "POST",
         "/apis/events.k8s.io/v1/namespaces/argocd/events", identity="admin", content_type="application/json",
         agent=KUBECTL_UA,
         body={"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "app-00.ev", "namespace": "argocd"},
               "regarding": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "name": "app-00", "namespace": "argocd"},
               "reason": "ImagesUpdated", "note": "x", "type": "Normal", "action": "Update",
               "reportingController": "argocd-ecr-updater", "reportingInstance": "argocd-ecr-updater",
               "eventTime": "2026-01-01T00:00:00.000000Z"}),
    case("get-secret-forbidden", "the function may not read Secrets", "GET",
         "/api/v1/namespaces/argocd/secrets/repo-creds"),
    case("get-secret", "a git write-back Secret", "GET", "/api/v1/namespaces/argocd/secrets/repo-creds",
         identity="admin"),
    case("list-secrets-label-selector", "repository credentials by label", "GET", "/api/v1/namespaces/argocd/secrets",
         [("labelSelector", "argocd.argoproj.io/secret-type in (repo-creds,repository)")], identity="admin"),
    case("get-configmap-aws-auth", "doctor reads aws-auth", "GET", "/api/v1/namespaces/kube-system/configmaps/aws-auth",
         identity="admin"),
    case("self-subject-access-review-allowed", "can-i patch applications", "POST",
         "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", content_type="application/json",
         body=review("SelfSubjectAccessReview", "patch", "applications", "argoproj.io")),
    case("self-subject-access-review-denied", "can-i delete applications", "POST",
         "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", content_type="application/json",
         body=review("SelfSubjectAccessReview", "delete", "applications", "argoproj.io")),
    case("subject-access-review", "doctor asks about the function's group", "POST",
         "/apis/authorization.k8s.io/v1/subjectaccessreviews", identity="admin", content_type="application/json",
         body=review("SubjectAccessReview", "patch", "imageupdaters", "argocd-image-updater.argoproj.io",
                     subresource="status", subject=True)),
    case("subject-access-review-forbidden", "the function may not create SubjectAccessReviews", "POST",
         "/apis/authorization.k8s.io/v1/subjectaccessreviews", content_type="application/json",
         body=review("SubjectAccessReview", "patch", "applications", "argoproj.io", subject=True)),
]

# Run after Image Updater v1.3.0's CRD replaces the vendored one: its schema defaults
# `updateStrategy` to semver on every image (and at spec level), over the spec's own setting.
PHASE_V130 = [
    case("v130-create-imageupdater", "an object created under v1.3.0's CRD", "POST", IUS, identity="admin",
         content_type="application/json", agent=KUBECTL_UA,
         body=image_updater("v130", [{"alias": "app", "imageName": "r.example.com/web",
                                  "commonUpdateSettings": {"allowTags": "regexp:^1[.]"}}])),
    case("v130-list-imageupdaters", "the function's list under v1.3.0's CRD", "GET", IUS, [("limit", "500")]),
]


class Server:
    def __init__(self, base, ca, tokens):
        self.base = base.rstrip("/")
        self.context = ssl.create_default_context(cafile=ca)
        self.tokens = tokens

    def send(self, request):
        query = urllib.parse.urlencode([tuple(pair) for pair in request["query"]])
        url = self.base + request["path"] + ("?" + query if query else "")
        body = request["body"]
        data = None
        if body is not None:
            data = json.dumps(body).encode()
        headers = dict(request["headers"])
        headers["authorization"] = "Bearer " + self.tokens[request["identity"]]
        http = urllib.request.Request(url, data=data, method=request["method"], headers=headers)
        try:
            with urllib.request.urlopen(http, context=self.context) as answer:
                return answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.headers, refused.read()


KEPT_HEADERS = ("content-type", "warning")


def record(server, cases, previous):
    recordings = []
    for c in cases:
        request = c["request"]
        if request["continue_from"]:
            token = previous[request["continue_from"]]["response"]["body"]["metadata"]["continue"]
            request["query"] = [[k, token if k == "continue" else v] for k, v in request["query"]]
        status, headers, raw = server.send(request)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        kept = {}
        for name in KEPT_HEADERS:
            values = headers.get_all(name) or []
            if values:
                kept[name] = values
        c["response"] = {"status": status, "headers": kept, "body": body}
        previous[c["name"]] = c
        recordings.append(c)
        print(f"{status} {c['name']}", file=sys.stderr)
    return recordings


def write(name, value):
    path = os.path.join(OUT, name)
    with open(path, "w") as out:
        json.dump(value, out, indent=1, sort_keys=False)
        out.write("\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--admin-token", required=True)
    parser.add_argument("--function-token", required=True)
    parser.add_argument("--phase", choices=["main", "v1.3.0"], default="main")
    args = parser.parse_args()
    server = Server(args.server, args.ca, {"admin": args.admin_token, "function": args.function_token})
    os.makedirs(OUT, exist_ok=True)
    if args.phase == "main":
        for item in SETUP:
            setup = {"identity": "admin", "method": "POST", "path": item["path"],
                     "query": [["fieldManager", "kubectl-client-side-apply"]],
                     "headers": {"content-type": "application/json", "accept": "application/json",
                                 "user-agent": KUBECTL_UA}, "body": item["object"]}
            status, _, raw = server.send(setup)
            if status not in (201, 409):
                sys.exit(f"setup {item['path']}: {status} {raw[:300]!r}")
        write("setup.json", [item["object"] for item in SETUP[1:]])
        version = server.send({"identity": "admin", "method": "GET", "path": "/version", "query": [],
                               "headers": {}, "body": None})
        write("version.json", json.loads(version[2]))
        recordings = record(server, CASES, {})
        write("recordings.json", recordings)
    else:
        write("recordings-imageupdater-v1.3.0.json", record(server, PHASE_V130, {}))


if __name__ == "__main__":
    main()
