//! Any bytes that parse as JSON must be classified as an event or refused, never panic, both
//! by a function with a sweep queue and by one without.
#![no_main]

use argocd_ecr_updater::event::{Intake, parse};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = parse(&value, &Intake::default());
        let queue = "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep";
        let _ = parse(
            &value,
            &Intake {
                sweep_queue_arn: Some(queue),
            },
        );
    }
});
