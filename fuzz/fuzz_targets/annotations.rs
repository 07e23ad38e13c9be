//! Annotation maps built from arbitrary bytes: keys cycle through the ones Image Updater
//! reads, values are the fuzzer's. Parsing must end in configs or specific errors.
#![no_main]

use std::collections::BTreeMap;

use argocd_ecr_updater::annotations::{AppConfig, PREFIX};

const KEYS: [&str; 16] = [
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

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut annotations = BTreeMap::new();
    for (i, value) in text.split('\n').enumerate() {
        annotations.insert(
            format!("{PREFIX}{}", KEYS[i % KEYS.len()]),
            value.to_string(),
        );
    }
    if let Some(config) = AppConfig::parse(&annotations) {
        for image in config.images {
            if let Err(e) = image.config {
                assert!(!e.problem.is_empty());
            }
        }
    }
});
