//! Builders for what tests feed the function: ECR events, Applications, images. Unit tests,
//! end-to-end tests and benches all take their shapes from here, so each is written once:
//!
//! ```ignore
//! let app = Application::tracking("web", SEED_IMAGE, "1.0.0")
//!     .annotate("app.update-strategy", "latest")
//!     .owned_by_application_set("fleet")
//!     .build();
//! ```

use serde::Deserialize;
use serde_json::{Value, json};

use crate::aws::Image;

pub const ACCOUNT: &str = "768157413559";
pub const REGION: &str = "ap-northeast-2";
/// The seed's repository, Application and running tag, as the README describes them.
pub const SEED_REPOSITORY: &str = "barun-dev-ecr";
pub const SEED_IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr";
pub const SEED_APP: &str = "aws-pipeline-test";
pub const SEED_TAG: &str = "20250825-120000";
/// The tag `events/push-date-tag.json` pushes.
pub const PUSHED_TAG: &str = "20250825-153012";
/// Image Updater's annotation prefix.
pub const IMAGE_UPDATER: &str = "argocd-image-updater.argoproj.io/";

const SEED_APPLICATION: &str = include_str!("../seed/applications/aws-pipeline-test.yaml");
const SEED_IMAGE_UPDATER: &str = include_str!("../seed-imageupdater/imageupdaters/invitation.yaml");

/// The repository's root (where `events/` is), for the root package's tests, the CLI's and
/// the benches alike.
pub fn repository_root() -> std::path::PathBuf {
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join("events").is_dir())
        .unwrap_or(package)
        .to_path_buf()
}

/// A sample event from `events/`, as shipped.
pub fn sample_event(name: &str) -> Value {
    let path = repository_root().join("events").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `KUBE_CA_DATA` for a CA PEM: its base64.
pub fn kube_ca_data(pem: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// `sha256:` and 64 times `c`: a digest that says which image it is at a glance.
pub fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// An `ECR Image Action` PUSH of `repository:tag` in the seed's account and region.
pub fn push_event(repository: &str, tag: &str, time: &str) -> Value {
    json!({"version": "0", "id": format!("evt-{tag}"), "detail-type": "ECR Image Action", "source": "aws.ecr",
           "account": ACCOUNT, "time": time, "region": REGION, "resources": [],
           "detail": {"result": "SUCCESS", "repository-name": repository, "image-digest": digest('9'),
                      "action-type": "PUSH", "image-tag": tag}})
}

/// The payload of a scheduled reconcile.
pub fn reconcile_event() -> Value {
    json!({"action": "reconcile"})
}

/// `sha256:` and `n` in 64 hex digits: one distinct digest per number.
pub fn numbered_digest(n: usize) -> String {
    format!("sha256:{n:064x}")
}

/// A single-platform image.
pub fn image(repository: &str, tag: &str, digest_char: char, pushed_at: &str) -> Image {
    multi_arch_image(repository, tag, digest_char, pushed_at, &[])
}

/// A single-platform image with any digest, tagged or (`None`) untagged.
pub fn image_with_digest(
    repository: &str,
    tag: Option<&str>,
    digest: &str,
    pushed_at: &str,
) -> Image {
    Image::deserialize(
        json!({"repository": repository, "tag": tag, "digest": digest, "pushedAt": pushed_at}),
    )
    .unwrap_or_else(|e| panic!("fixture image {repository}:{tag:?}: {e}"))
}

/// An image index holding `platforms` (`os/arch[/variant]`); a plain manifest when empty.
pub fn multi_arch_image(
    repository: &str,
    tag: &str,
    digest_char: char,
    pushed_at: &str,
    platforms: &[&str],
) -> Image {
    let media_type = if platforms.is_empty() {
        "application/vnd.oci.image.manifest.v1+json"
    } else {
        "application/vnd.oci.image.index.v1+json"
    };
    Image::deserialize(
        json!({"repository": repository, "tag": tag, "digest": digest(digest_char),
        "pushedAt": pushed_at, "platforms": platforms, "mediaType": media_type}),
    )
    .unwrap_or_else(|e| panic!("fixture image {repository}:{tag}: {e}"))
}

/// A Helm chart pushed to ECR as an OCI artifact (`helm push`): `tag` is the chart version
/// with Helm's `+` written `_`.
pub fn chart(repository: &str, tag: &str, digest_char: char, pushed_at: &str) -> Image {
    Image::deserialize(
        json!({"repository": repository, "tag": tag, "digest": digest(digest_char),
        "pushedAt": pushed_at, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactMediaType": "application/vnd.cncf.helm.config.v1+json"}),
    )
    .unwrap_or_else(|e| panic!("fixture chart {repository}:{tag}: {e}"))
}

/// A Helm source with these parameters.
pub fn helm_source(parameters: &[(&str, &str)]) -> Value {
    json!({"repoURL": "https://git.example.com/web.git", "path": "chart", "helm": {
        "parameters": parameters.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>()}})
}

/// An Argo CD Application, built up step by step.
#[derive(Debug, Clone)]
pub struct Application(Value);

impl Application {
    /// The seed's Application, exactly as the stand-ins load it.
    pub fn seed() -> Self {
        let app = serde_yaml_ng::from_str(SEED_APPLICATION)
            .unwrap_or_else(|e| panic!("the seed Application parses: {e}"));
        Self(app)
    }

    /// A Helm Application `name` in `argocd` tracking `image` as alias `app`, running `tag`,
    /// with the image and tag as `image.name`/`image.tag` parameters.
    pub fn tracking(name: &str, image: &str, tag: &str) -> Self {
        Self(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd",
                         "annotations": {format!("{IMAGE_UPDATER}image-list"): format!("app={image}")}},
            "spec": {"project": "default",
                     "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"},
                     "source": helm_source(&[("image.name", image), ("image.tag", tag)])},
            "status": {"sourceType": "Helm", "summary": {"images": [format!("{image}:{tag}")]}}}),
        )
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0["metadata"]["namespace"] = json!(namespace);
        self
    }

    /// Sets an Image Updater annotation (`key` without the prefix).
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["annotations"][format!("{IMAGE_UPDATER}{key}")] = json!(value);
        self
    }

    /// Sets any annotation by its full key.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["annotations"][key] = json!(value);
        self
    }

    /// Replaces the single source's Helm parameters.
    pub fn helm(mut self, parameters: &[(&str, &str)]) -> Self {
        self.0["spec"]["source"] = helm_source(parameters);
        self.0["status"]["sourceType"] = json!("Helm");
        self
    }

    /// Replaces the single source, and the type Argo CD reports for it.
    pub fn source(mut self, source: Value, kind: &str) -> Self {
        self.0["spec"]["source"] = source;
        self.0["status"]["sourceType"] = json!(kind);
        self
    }

    /// Makes it a multi-source Application with these sources and reported types.
    pub fn sources(mut self, sources: Vec<Value>, kinds: &[&str]) -> Self {
        if let Some(spec) = self.0["spec"].as_object_mut() {
            spec.remove("source");
        }
        self.0["spec"]["sources"] = json!(sources);
        if let Some(status) = self.0["status"].as_object_mut() {
            status.remove("sourceType");
        }
        self.0["status"]["sourceTypes"] = json!(kinds);
        self
    }

    /// What Argo CD reports the Application running (`status.summary.images`).
    pub fn running(mut self, images: &[&str]) -> Self {
        self.0["status"]["summary"]["images"] = json!(images);
        self
    }

    pub fn owned_by_application_set(mut self, name: &str) -> Self {
        self.0["metadata"]["ownerReferences"] = json!([{"apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet", "name": name, "uid": format!("uid-{name}")}]);
        self
    }

    /// Sets `status.history`.
    pub fn history(mut self, history: Value) -> Self {
        self.0["status"]["history"] = history;
        self
    }

    /// Changes anything else, as a last resort.
    pub fn with(mut self, change: impl FnOnce(&mut Value)) -> Self {
        change(&mut self.0);
        self
    }

    pub fn build(self) -> Value {
        self.0
    }
}

/// An `ImageUpdater` object in `argocd` with these `applicationRefs`.
pub fn image_updater(name: &str, application_refs: Value) -> Value {
    json!({"apiVersion": "argocd-image-updater.argoproj.io/v1alpha1", "kind": "ImageUpdater",
           "metadata": {"name": name, "namespace": "argocd"},
           "spec": {"applicationRefs": application_refs}})
}

/// The `ImageUpdater` object equivalent to the seed Application's annotations, as Image
/// Updater's migration guide would write it: the one in `seed-imageupdater/`.
pub fn seed_image_updater() -> Value {
    serde_yaml_ng::from_str(SEED_IMAGE_UPDATER)
        .unwrap_or_else(|e| panic!("the seed ImageUpdater object parses: {e}"))
}

/// An Argo CD `status` of about 50 KB (230 resources), as a real Application of a few
/// dozen Deployments has, running `registry/repository` and one image of its own.
pub fn large_status(i: usize, registry: &str, repository: &str) -> Value {
    let resources: Vec<Value> = (0..230)
        .map(|r| {
            json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": format!("team-{}", i % 40),
                   "name": format!("deployment-number-{r}-of-application-{i}"), "status": "Synced",
                   "health": {"status": "Healthy", "message": "deployment has minimum availability and is progressing"}})
        })
        .collect();
    json!({"sourceType": "Helm", "resources": resources,
           "summary": {"images": [format!("{registry}/svc-{i}:20250101-000000"), format!("{registry}/{repository}:20250101-000000")]},
           "sync": {"status": "Synced"}, "health": {"status": "Healthy"}})
}

/// The benches' Application `i` of `total`: `matching` of them (spread evenly) track
/// `registry/repository` with the seed's date-tag policy, the others a repository of their
/// own; every one runs `20250101-000000` and carries a [`large_status`].
pub fn bench_application(
    i: usize,
    total: usize,
    matching: usize,
    registry: &str,
    repository: &str,
) -> Value {
    let tracked = if i % (total / matching) == 7 {
        repository.to_string()
    } else {
        format!("svc-{i}")
    };
    let image = format!("{registry}/{tracked}");
    Application::tracking(&format!("app-{i:05}"), &image, "20250101-000000")
        .annotate("app.update-strategy", "latest")
        .annotate("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$")
        .annotate("app.helm.image-name", "image.repository")
        .annotate("app.helm.image-tag", "image.tag")
        .helm(&[
            ("image.repository", &image),
            ("image.tag", "20250101-000000"),
        ])
        .with(|app| app["status"] = large_status(i, registry, repository))
        .build()
}

/// A Python program that runs its arguments as one child and prints, as JSON, the child's
/// exit code, wall time, peak RSS (`getrusage(RUSAGE_CHILDREN)` sees exactly that child) and
/// standard output: how the benches measure a process, theirs or ours, the same way.
pub const MEASURE_CHILD: &str = "import json,resource,subprocess,sys,time
t=time.monotonic()
r=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE)
w=time.monotonic()-t
print(json.dumps({'code':r.returncode,'wall_s':w,'peak_rss_kb':resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,'stdout':r.stdout.decode()}))";

/// Drops what the API server sets on an object read from it (`resourceVersion`, `uid`,
/// `creationTimestamp`, `generation`, `managedFields`), so it can be inserted again as a
/// fresh object.
pub fn strip_server_fields(object: &mut Value) {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for key in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            meta.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_fixture_is_the_seed_file() {
        let seed = Application::seed().build();
        assert_eq!(seed["metadata"]["name"], SEED_APP);
        assert_eq!(
            seed["spec"]["source"]["helm"]["parameters"][1]["value"],
            SEED_TAG
        );
    }

    #[test]
    fn a_multi_source_application_loses_its_single_source() {
        let app = Application::tracking("web", SEED_IMAGE, "1")
            .sources(vec![helm_source(&[])], &["Helm"])
            .build();
        assert!(app["spec"].get("source").is_none());
        assert_eq!(app["status"]["sourceTypes"], json!(["Helm"]));
    }
}
