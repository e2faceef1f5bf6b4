//! Finds the system DPDK with pkg-config, generates narrow bindings with bindgen and compiles
//! the C shim that exposes DPDK's static-inline API as real symbols.

use std::env;
use std::path::PathBuf;

fn main() {
    for file in ["src/shim.c", "src/shim.h", "src/burst_guard.c", "src/burst_guard.h"] {
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let dpdk = match pkg_config::Config::new().atleast_version("22.11").probe("libdpdk") {
        Ok(lib) => lib,
        Err(err) => {
            // One line that says what to do; the pkg-config detail follows for the curious.
            eprintln!(
                "error: DPDK 22.11 or newer not found by pkg-config: install libdpdk-dev and pkg-config (make deps does it) [{}]",
                err.to_string().lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("")
            );
            std::process::exit(1);
        }
    };

    // DPDK's pkg-config cflags carry `-include rte_config.h` and `-march=...`; clang and cc both
    // need them, because the headers assume the machine flags that DPDK was built with.
    let cflags = pkg_config_output(&["--cflags", "libdpdk"]);
    let cflag_list: Vec<String> = shell_words(&cflags);

    let mut build = cc::Build::new();
    build.file("src/shim.c").opt_level(2).warnings(true);
    // The burst guard defines the process's munmap: only with its feature (burst_guard.c).
    if env::var_os("CARGO_FEATURE_BURST_GUARD").is_some() {
        build.file("src/burst_guard.c").define("RACEWAY_BURST_GUARD", None);
    }
    for flag in &cflag_list {
        build.flag(flag);
    }
    build.compile("raceway_dpdk_shim");

    let bindings = bindgen::Builder::default()
        .header("src/shim.h")
        .clang_args(cflag_list.iter())
        .allowlist_function("rte_eal_init")
        .allowlist_function("rte_eal_cleanup")
        .allowlist_function("rte_eal_get_runtime_dir")
        .allowlist_function("rte_dev_probe")
        .allowlist_function("rte_eal_remote_launch")
        .allowlist_function("rte_eal_wait_lcore")
        .allowlist_function("rte_get_next_lcore")
        .allowlist_function("rte_lcore_count")
        .allowlist_function("rte_get_main_lcore")
        .allowlist_function("rte_get_tsc_hz")
        .allowlist_function("rte_socket_id")
        .allowlist_function("rte_strerror")
        .allowlist_function("rte_eth_dev_count_avail")
        .allowlist_function("rte_eth_dev_get_port_by_name")
        .allowlist_function("rte_eth_dev_socket_id")
        .allowlist_function("rte_eth_dev_start")
        .allowlist_function("rte_eth_dev_stop")
        .allowlist_function("rte_eth_dev_close")
        .allowlist_function("rte_eth_dev_set_mtu")
        .allowlist_function("rte_eth_dev_set_link_up")
        .allowlist_function("rte_eth_dev_set_link_down")
        .allowlist_function("rte_eth_promiscuous_enable")
        .allowlist_function("rte_eth_stats_get")
        .allowlist_function("rte_pktmbuf_pool_create")
        .allowlist_function("rte_mempool_avail_count")
        .allowlist_function("rte_mempool_in_use_count")
        .allowlist_function("rte_mempool_free")
        .allowlist_function("shim_.*")
        .allowlist_function("rte_telemetry_register_cmd")
        .allowlist_function("rte_pdump_init")
        .allowlist_function("rte_pdump_uninit")
        .allowlist_function("rte_tel_data_alloc")
        .allowlist_function("rte_tel_data_start_dict")
        .allowlist_function("rte_tel_data_add_dict_u64")
        .allowlist_function("rte_tel_data_add_dict_container")
        .allowlist_function("rte_tel_data_string")
        .allowlist_type("rte_eth_stats")
        .allowlist_var("RTE_MAX_ETHPORTS")
        .allowlist_var("RTE_MAX_LCORE")
        .allowlist_var("RTE_PKTMBUF_HEADROOM")
        .allowlist_var("RTE_MBUF_DEFAULT_BUF_SIZE")
        // Packed-and-aligned or layout-heavy types we only ever hold by pointer.
        .opaque_type("rte_mbuf")
        .opaque_type("rte_mempool")
        .opaque_type("rte_eth_conf")
        .opaque_type("rte_eth_dev_info")
        .opaque_type("rte_tel_data")
        .derive_default(true)
        .generate_comments(false)
        .layout_tests(true)
        .generate()
        .unwrap_or_else(|err| {
            eprintln!(
                "error: bindgen could not read the DPDK headers (is libclang installed? make deps does it): {err}"
            );
            std::process::exit(1);
        });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings.write_to_file(out.join("bindings.rs")).expect("OUT_DIR is writable");

    // Link the libraries pkg-config named (probe() already emitted them); PMDs for virtual
    // devices are plugins that the EAL loads from its driver directory at start.
    let _ = dpdk;
}

fn pkg_config_output(args: &[&str]) -> String {
    let output = std::process::Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(args)
        .output()
        .unwrap_or_else(|err| {
            eprintln!("error: cannot run pkg-config: install pkg-config (make deps does it): {err}");
            std::process::exit(1);
        });
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// pkg-config output is whitespace separated and DPDK's never quotes; `-include FILE` stays two
/// words, which both cc and clang accept.
fn shell_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}
