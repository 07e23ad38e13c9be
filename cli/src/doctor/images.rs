//! Running images ECR has archived: an Application whose `status.summary.images` (what Argo
//! CD deployed) names an image ECR keeps in its archive storage class runs Pods no node can
//! start again (a new node, a rescheduled Pod, a restart pulls it). The function never rolls
//! out an archived image; one archived after it was deployed is only found by looking.

use std::collections::BTreeMap;

use argocd_ecr_updater::cluster::kube::{KubeClient, ListOptions};
use argocd_ecr_updater::config::{ClusterSpec, Config};
use argocd_ecr_updater::registry::ecr::Ecr;

use super::{Checklist, Clients};

const AREA: &str = "images";

/// Doctor reads this many Applications of a cluster at most: a check, not a sweep.
const MAX_APPLICATIONS: usize = 500;

/// One running image in this region's ECR: (account, repository, tag).
type Running = (String, String, String);

/// The images of `summary` (Argo CD's `status.summary.images`) that are tags in ECR of
/// `region`; digests and other registries are left out.
pub(super) fn ecr_tags(summary: &[&str], region: &str) -> Vec<Running> {
    summary
        .iter()
        .filter_map(|image| {
            let (host, rest) = image.split_once('/')?;
            let account = host.strip_suffix(&format!(".dkr.ecr.{region}.amazonaws.com"))?;
            let valid = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
            // `repo:tag`, never `repo@sha256:…` nor `repo:tag@sha256:…` (pinned by digest).
            let (repository, tag) = rest.rsplit_once(':')?;
            (valid && !rest.contains('@') && !repository.is_empty() && !tag.is_empty())
                .then(|| (account.to_string(), repository.to_string(), tag.to_string()))
        })
        .collect()
}

/// The check's line from what runs archived (`ns/app`, `image`), out of what was read.
pub(super) fn verdict(
    archived: &[(String, String)],
    applications: usize,
    images: usize,
    capped: bool,
) -> Result<String, (String, String)> {
    let read = format!(
        "{applications} Application(s), {images} running ECR image(s){}",
        if capped {
            format!(" (the first {MAX_APPLICATIONS})")
        } else {
            String::new()
        }
    );
    if archived.is_empty() {
        return Ok(format!(
            "no Application runs an archived image ({read} read)"
        ));
    }
    let runs: Vec<String> = archived
        .iter()
        .map(|(app, image)| format!("{app} runs {image}"))
        .collect();
    Err((
        format!(
            "{}: archived in ECR, so a node that pulls it again (a new node, a rescheduled Pod) cannot; {read} read",
            runs.join("; ")
        ),
        "restore each (aws ecr update-image-storage-class --repository-name <repository> --image-id imageTag=<tag> --target-storage-class STANDARD), or roll the Application forward to a pullable image".into(),
    ))
}

/// Lists the cluster's watched Applications (within [`MAX_APPLICATIONS`]), reads what each
/// runs, and asks ECR which of those tags are archived.
pub(super) async fn archived(
    clients: &Clients,
    config: &Config,
    spec: &ClusterSpec,
    region: &str,
    kube: &KubeClient,
    list: &mut Checklist,
) {
    let name = format!("archived running images in {}", spec.name);
    let mut apps = Vec::new();
    for scope in KubeClient::list_scopes(&spec.namespaces) {
        let options = ListOptions {
            label_selector: config.label_selector.as_deref(),
            page_size: config.page_size,
            naming: None,
        };
        match kube
            .list_application_metadata(&scope, options, |_| true)
            .await
        {
            Ok((found, _)) => apps.extend(found),
            Err(e) => {
                list.skip(
                    AREA,
                    &name,
                    format!("the Applications could not be listed with your credentials: {e}"),
                    "kubectl get applications -A -o jsonpath='{.items[*].status.summary.images}'"
                        .into(),
                );
                return;
            }
        }
    }
    let capped = apps.len() > MAX_APPLICATIONS;
    apps.truncate(MAX_APPLICATIONS);
    let mut running: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    let mut images = 0;
    for meta in &apps {
        let Ok(app) = kube.get_application(&meta.namespace, &meta.name).await else {
            continue;
        };
        let summary: Vec<&str> = app["status"]["summary"]["images"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        for (account, repository, tag) in ecr_tags(&summary, region) {
            images += 1;
            let who = format!("{}/{}", meta.namespace, meta.name);
            running
                .entry((account, repository))
                .or_default()
                .push((who, tag));
        }
    }
    let ecr = Ecr::new(clients.ecr.clone());
    let mut archived = Vec::new();
    for ((account, repository), users) in &running {
        let mut tags: Vec<String> = users.iter().map(|(_, tag)| tag.clone()).collect();
        tags.sort();
        tags.dedup();
        match ecr.describe_tags(account, repository, &tags).await {
            Ok(described) => {
                for info in described.iter().filter(|i| i.archived) {
                    for (who, _) in users.iter().filter(|(_, tag)| *tag == info.name) {
                        let image = format!(
                            "{account}.dkr.ecr.{region}.amazonaws.com/{repository}:{}",
                            info.name
                        );
                        archived.push((who.clone(), image));
                    }
                }
            }
            Err(e) => {
                list.skip(
                    AREA,
                    &name,
                    format!("ECR could not be asked about {repository} with your credentials: {e}"),
                    format!("aws ecr describe-images --repository-name {repository} --query 'imageDetails[?imageStatus!=`ACTIVE`]'"),
                );
                return;
            }
        }
    }
    match verdict(&archived, apps.len(), images, capped) {
        Ok(detail) => list.add(AREA, name, Ok(detail)),
        Err((risk, advice)) => list.warn(AREA, name, risk, advice),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGION: &str = "ap-northeast-2";

    #[test]
    fn only_tags_in_this_regions_ecr_are_asked_about() {
        let summary = [
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/team/web:1.2",
            "768157413559.dkr.ecr.us-east-1.amazonaws.com/web:1.2",
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web@sha256:00",
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web:1.2@sha256:00",
            "docker.io/library/nginx:1.27",
            "nginx",
        ];
        assert_eq!(
            ecr_tags(&summary, REGION),
            [(
                "768157413559".to_string(),
                "team/web".to_string(),
                "1.2".to_string()
            )]
        );
    }

    #[test]
    fn an_archived_running_image_is_a_warning_naming_the_application_and_the_restore() {
        assert_eq!(
            verdict(&[], 3, 4, false),
            Ok("no Application runs an archived image (3 Application(s), 4 running ECR image(s) read)".into())
        );
        let (risk, advice) =
            verdict(&[("argocd/web".into(), "r/web:1.0".into())], 600, 900, true).unwrap_err();
        assert!(
            risk.starts_with("argocd/web runs r/web:1.0: archived in ECR"),
            "{risk}"
        );
        assert!(risk.contains("(the first 500)"), "{risk}");
        assert!(advice.contains("update-image-storage-class"), "{advice}");
    }
}
