//! Any bytes that parse as JSON must be classified as an event or refused, never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = argocd_ecr_updater::event::parse(&value);
    }
});
