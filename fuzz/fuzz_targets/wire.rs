//! Any bytes through the frame parser and the classifier: never a panic, and a frame the
//! classifier does not forward is left byte for byte as it came.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raceway::classify::{Classifier, Verdict};
use raceway::config::Config;
use std::sync::OnceLock;

const CONFIG: &str = include_str!("../../config/demo.toml");

fuzz_target!(|data: &[u8]| {
    static CLASSIFIER: OnceLock<Classifier> = OnceLock::new();
    let classifier = CLASSIFIER.get_or_init(|| Classifier::new(&Config::parse(CONFIG, "demo.toml").expect("demo config")));
    let _ = raceway::wire::parse::parse(data);
    let _ = classifier.priority(data);
    let mut frame = data.to_vec();
    match classifier.classify(&mut frame) {
        Verdict::Forward { .. } => {
            // Only TTL/hop limit (and the IPv4 checksum) may change.
            assert_eq!(frame.len(), data.len());
        }
        _ => assert_eq!(frame, data, "a frame not forwarded was changed"),
    }
});
