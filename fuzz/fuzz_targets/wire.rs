//! Any bytes through the frame parser and the classifier (without and with a control plane,
//! which punts): never a panic. (The classifier borrows the frame immutably: it never writes.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use raceway_core::pipeline::classify::Classifier;
use raceway_core::config::Config;
use std::cell::RefCell;

const CONFIG: &str = include_str!("../../config/demo.toml");

/// The demo's switch with a control plane: punts ARP, LACP, LLDP, an extra EtherType, link-local
/// and expiring packets, and routes over a next hop.
const CONTROL: &str = "\n[control]\npunt_ethertypes = [\"0x88b7\"]\n\
    [[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00:00:00:20:01\"\nport = \"up0\"\n\
    [[route]]\nprefix = \"198.51.100.0/24\"\nvia = [\"10.255.0.1\", \"10.255.0.3\"]\n";

thread_local! {
    /// Built once; the classifiers keep their destination caches from one input to the next,
    /// as a worker's do from frame to frame.
    static CLASSIFIERS: RefCell<[Classifier; 2]> = RefCell::new({
        let plain = Config::parse(CONFIG, "demo.toml").expect("demo config");
        let control = Config::parse(&format!("{CONFIG}{CONTROL}"), "demo.toml").expect("demo config with control");
        [Classifier::new(&plain), Classifier::new(&control)]
    });
}

fuzz_target!(|data: &[u8]| {
    let _ = raceway_core::wire::parse::parse(data);
    CLASSIFIERS.with_borrow_mut(|classifiers| {
        for classifier in classifiers.iter_mut() {
            let _ = classifier.priority(data);
            let _ = classifier.classify(data);
        }
    });
});
