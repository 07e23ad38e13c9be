//! Annotation maps built from arbitrary bytes: keys cycle through the ones Image Updater
//! reads, values are the fuzzer's. Parsing must end in configs or specific errors.
#![no_main]

use argocd_ecr_updater::appconfig::annotations::AppConfig;

include!("../annotation_map.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let annotations = fuzz_annotation_map(&text);
    if let Some(config) = AppConfig::parse(&annotations) {
        for image in config.images {
            if let Err(e) = image.config {
                assert!(!e.problem.is_empty());
            }
        }
    }
});
