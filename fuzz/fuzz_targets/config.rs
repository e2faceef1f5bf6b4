//! Any text as a config: an error or a config, never a panic; a config that parses builds a
//! switch (its PFC plan exists) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raceway_core::packet::HeapPacket;
use raceway_core::config::Config;
use raceway_core::switch::Switch;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(config) = Config::parse(&text, "fuzz.toml") {
        // Keep the buffer the fuzzer asks for within reason: the switch allocates a slot per cell.
        if config.buffer_bytes <= 1 << 26 {
            let _switch: Switch<HeapPacket> = Switch::new(&config, 0);
        }
    }
});
