//! What a fresh process pays the first time it uses crypto, before anything else does: the
//! first random-number fill of aws-lc (which every TLS handshake and SigV4 signature waits
//! for), a reqwest client with only a given CA, and one that loads the platform's roots.
//! Each run is a fresh process; run it several times for a range.
//!
//! `cargo bench --bench first_crypto`

use std::time::Instant;

fn main() {
    let started = Instant::now();
    let mut seed = [0u8; 32];
    aws_lc_rs::rand::fill(&mut seed).expect("aws-lc gives random bytes");
    let first_fill = started.elapsed();
    let started = Instant::now();
    aws_lc_rs::rand::fill(&mut seed).expect("aws-lc gives random bytes");
    let second_fill = started.elapsed();
    let started = Instant::now();
    let only_ca = reqwest::Client::builder()
        .tls_certs_only(Vec::<reqwest::Certificate>::new())
        .build();
    let ca_only = started.elapsed();
    let started = Instant::now();
    let platform = reqwest::Client::builder().build();
    let with_roots = started.elapsed();
    assert!(only_ca.is_ok() && platform.is_ok());
    println!(
        "first aws-lc random fill {:.1} ms (then {:.3} ms); reqwest client, given CA only {:.2} ms; with the platform's roots {:.1} ms",
        first_fill.as_secs_f64() * 1e3,
        second_fill.as_secs_f64() * 1e3,
        ca_only.as_secs_f64() * 1e3,
        with_roots.as_secs_f64() * 1e3
    );
}
