// The fuzz input's reading as annotations, shared by `fuzz_targets/annotations.rs` and the
// seed-corpus test (`tests/e2e/fuzz_inputs.rs`) through `include!`, so a seed means the
// same to both: line i is the value of the i-th key, cycling.

/// Keys cycle through the ones Image Updater reads.
const FUZZ_ANNOTATION_KEYS: [&str; 16] = [
    "image-list",
    "update-strategy",
    "allow-tags",
    "ignore-tags",
    "force-update",
    "tag-match",
    "a.update-strategy",
    "a.allow-tags",
    "a.platforms",
    "a.helm.image-spec",
    "a.helm.image-tag",
    "a.kustomize.image-name",
    "a.pull-secret",
    "write-back-method",
    "write-back-target",
    "git-branch",
];

fn fuzz_annotation_map(text: &str) -> std::collections::BTreeMap<String, String> {
    text.split('\n')
        .enumerate()
        .map(|(i, value)| {
            let key = FUZZ_ANNOTATION_KEYS[i % FUZZ_ANNOTATION_KEYS.len()];
            (format!("{}{key}", argocd_ecr_updater::appconfig::annotations::PREFIX), value.to_owned())
        })
        .collect()
}
