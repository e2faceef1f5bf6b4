//! net_memif server sockets as the switch meets them: the name `/proc/net/unix` lists for a
//! server port's device (`server_socket`), whether that name is bound (`bound`: a take-over
//! waits until the switch before has let it go), and a socket file a killed switch left behind
//! (`clear_stale_files`: with `socket-abstract=no` the file outlives its process, and DPDK's
//! memif then cannot create its socket, so the next start failed with "device not found after
//! EAL init").
//!
//! Invariant: a file is removed only when it is a socket that no process has bound, at a path
//! a server port of this config names, and only by a start that holds the ports lock (no
//! switch of this config runs).

use crate::config::{device_name, Config};
use crate::dpdk::DpdkError;
use std::os::unix::fs::FileTypeExt;

/// The socket a net_memif server device listens on, as `/proc/net/unix` names it (`@` before
/// an abstract name, DPDK's default); `None` for any other device, and a memif client.
pub fn server_socket(devargs: &str) -> Option<String> {
    if !device_name(devargs).starts_with("net_memif") {
        return None;
    }
    let (mut socket, mut abstract_name, mut server) = ("/run/memif.sock", true, true);
    for pair in devargs.split(',').skip(1) {
        match pair.split_once('=') {
            Some(("socket", value)) => socket = value,
            Some(("socket-abstract", value)) => abstract_name = value != "no",
            Some(("role", value)) => server = value != "client",
            _ => {}
        }
    }
    server.then(|| if abstract_name { format!("@{socket}") } else { socket.to_string() })
}

/// Whether a unix socket named `name` (`server_socket`'s spelling) is bound in this network
/// namespace.
pub fn bound(name: &str) -> bool {
    std::fs::read_to_string("/proc/net/unix")
        .is_ok_and(|table| table.lines().skip(1).any(|line| line.split_whitespace().nth(7) == Some(name)))
}

/// Removes the socket files of the config's memif server ports that no process has bound
/// (each said once in the log). A path that is not a socket, or a socket another process has
/// bound, is one clear error.
pub fn clear_stale_files(config: &Config) -> Result<(), DpdkError> {
    for port in &config.ports {
        let Some(name) = port.device.as_deref().and_then(server_socket) else { continue };
        if name.starts_with('@') {
            continue; // abstract: it went with its process
        }
        let fail = |problem: String| DpdkError { context: format!("port '{}'", port.name), problem };
        let path = std::path::Path::new(&name);
        let metadata = match std::fs::symlink_metadata(path) {
            Ok(metadata) => metadata,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(fail(format!("memif socket '{name}': {err}"))),
        };
        if !metadata.file_type().is_socket() {
            return Err(fail(format!("memif socket '{name}' is a file that is not a socket: remove it")));
        }
        if bound(&name) {
            return Err(fail(format!("memif socket '{name}' is bound by another process")));
        }
        std::fs::remove_file(path).map_err(|err| fail(format!("memif socket '{name}': cannot remove it: {err}")))?;
        tracing::info!("port '{}': removed the stale memif socket '{name}' (nothing listened on it)", port.name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memif_servers_socket_is_named_as_proc_names_it() {
        assert_eq!(server_socket("net_memif0,role=server,socket=/a.sock"), Some("@/a.sock".into()));
        assert_eq!(server_socket("net_memif3,socket=/a.sock,socket-abstract=no"), Some("/a.sock".into()));
        assert_eq!(server_socket("net_memif1"), Some("@/run/memif.sock".into()), "DPDK's defaults");
        assert_eq!(server_socket("net_memif0,role=client,socket=/a.sock"), None);
        assert_eq!(server_socket("net_af_packet0,iface=eth0"), None);
    }

    /// A config with one memif server port on `socket` (a file path).
    fn config_with_socket(socket: &std::path::Path) -> Config {
        let device = format!("device = \"net_memif0,role=server,socket={},socket-abstract=no\"", socket.display());
        crate::testing::Leaf::new("stale").port("m0", 1.0, &device).config()
    }

    #[test]
    fn a_stale_socket_file_is_removed_and_a_bound_one_or_a_plain_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m0.sock");
        let config = config_with_socket(&path);
        assert!(clear_stale_files(&config).is_ok(), "nothing there");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(bound(path.to_str().unwrap()));
        let error = clear_stale_files(&config).unwrap_err();
        assert!(error.problem.contains("bound by another process"), "{error:?}");
        assert!(path.exists(), "a bound socket is left alone");
        drop(listener);
        assert!(!bound(path.to_str().unwrap()), "closed");
        clear_stale_files(&config).unwrap();
        assert!(!path.exists(), "the stale socket is gone");
        std::fs::write(&path, "not a socket").unwrap();
        let error = clear_stale_files(&config).unwrap_err();
        assert!(error.problem.contains("not a socket"), "{error:?}");
        assert!(path.exists(), "a plain file is left alone");
    }
}
