//! The switch's side of `raceway show`: the documents it answers with (`state`, `route:`),
//! paged by `Pager` under the client's token (`ByToken`), so a document is built once and
//! read whole and consistent over many telemetry replies.
//!
//! Invariant: a page's reply fits DPDK's 8 KiB string and needs no JSON escape (hex digits
//! and one space); a token's pages come from one document.

use crate::config::Config;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// Document bytes per page: 8,000 hex digits and the page count fit DPDK's 8 KiB string.
pub const PAGE_BYTES: usize = 4000;
/// Documents or listings kept for clients still reading them.
const KEPT: usize = 4;

/// What the switch keeps for clients still reading it (a document, a route listing), by the
/// client's token: at most `KEPT`, the oldest pushed out, each let go once read to its end.
pub struct ByToken<T> {
    kept: Mutex<VecDeque<(String, Arc<T>)>>,
}

impl<T> Default for ByToken<T> {
    fn default() -> Self {
        Self { kept: Mutex::new(VecDeque::new()) }
    }
}

impl<T> ByToken<T> {
    /// What `token` is reading, if it is kept.
    pub fn get(&self, token: &str) -> Option<Arc<T>> {
        let kept = self.kept.lock().expect("by-token lock");
        kept.iter().find(|(kept_token, _)| kept_token == token).map(|(_, value)| Arc::clone(value))
    }

    /// Keeps `value` for `token`, in place of what it had.
    pub fn keep(&self, token: &str, value: Arc<T>) {
        let mut kept = self.kept.lock().expect("by-token lock");
        kept.retain(|(kept_token, _)| kept_token != token);
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back((token.to_string(), value));
    }

    /// Lets go of what `token` was reading.
    pub fn forget(&self, token: &str) {
        self.kept.lock().expect("by-token lock").retain(|(kept_token, _)| kept_token != token);
    }

    pub fn is_empty(&self) -> bool {
        self.kept.lock().expect("by-token lock").is_empty()
    }
}

/// The switch's side: documents being read, by the client's token.
#[derive(Default)]
pub struct Pager {
    kept: ByToken<Vec<u8>>,
}

impl Pager {
    /// The reply to `TOKEN VIEW PAGE`: builds the view's document with `build` on page 0 (or
    /// when the token is unknown), and answers `PAGES HEX` for the page asked.
    pub fn answer(&self, params: &str, build: impl FnOnce(&str) -> Option<Value>) -> Option<String> {
        let mut words = params.split_whitespace();
        let (token, view, page) = (words.next()?, words.next()?, words.next()?.parse::<usize>().ok()?);
        let document = match self.kept.get(token) {
            Some(document) if page > 0 => document,
            _ => {
                let document = Arc::new(build(view)?.to_string().into_bytes());
                self.kept.keep(token, Arc::clone(&document));
                document
            }
        };
        let pages = document.len().div_ceil(PAGE_BYTES).max(1);
        if page + 1 >= pages {
            // The last page: the document goes now rather than when later clients push it out.
            self.kept.forget(token);
        }
        let chunk = document.chunks(PAGE_BYTES).nth(page).unwrap_or(&[]);
        let mut reply = String::with_capacity(16 + 2 * chunk.len());
        let _ = write!(reply, "{pages} ");
        for byte in chunk {
            let _ = write!(reply, "{byte:02x}");
        }
        Some(reply)
    }
}

/// The `state` document: each port's state, the egress queues lossless priorities' pauses
/// hold (the PFC watchdog's), and the stats JSON.
pub fn state_document(config: &Config, ports: Vec<Value>, stats: Value) -> Value {
    let pfc_queues: Vec<usize> = (0..8).filter(|&queue| config.qos.pausable_queues() & (1 << queue) != 0).collect();
    json!({ "switch": config.name, "interfaces": ports, "pfc_queues": pfc_queues, "stats": stats })
}

/// One port's entry in the `state` document.
pub fn interface_entry(port: &crate::config::PortConfig, state: crate::link::PortState, speed_mbps: u64) -> Value {
    let addresses: Vec<String> = port.addresses.iter().map(|a| format!("{}/{}", a.address, a.len)).collect();
    json!({
        "name": port.name,
        "device": port.device.clone().unwrap_or_default(),
        "speed_mbps": speed_mbps,
        "mtu": state.mtu,
        "enabled": port.enabled,
        "admin_up": state.admin_up,
        "carrier": state.carrier,
        "addresses": addresses,
    })
}

/// The view asking for the FIB's answers for some addresses: `route:ADDR,ADDR,...`.
pub(super) const ROUTE_VIEW: &str = "route:";
/// Bytes of addresses in one request: DPDK's telemetry reads a request of up to 1 KiB.
pub(super) const ROUTE_REQUEST_BYTES: usize = 800;

/// The addresses a `route:` view asks about; `None` for another view or one that does not
/// parse.
pub fn route_view_addresses(view: &str) -> Option<Vec<std::net::IpAddr>> {
    let list = view.strip_prefix(ROUTE_VIEW)?;
    list.split(',').map(|address| address.parse().ok()).collect()
}

/// The `route:` document: for each address, the FIB's answer (`Fib::explain`) as an object
/// with `address`, `prefix`, `action` (`forward`, `drop`, `kernel`, `glean`), `reason`,
/// `next_hops` (each `port`, `ip`, `mac`, `weight`; a null MAC is a next hop not used now) and
/// `behind`: the kernel's routes for the prefix waiting behind the one in force (`metric`:
/// its metric; `aliases`: routes of its key, as `append` leaves them; `others`: of other
/// metrics, tables or kinds), or null when none wait.
pub fn route_document(
    fib: &crate::pipeline::fib::Fib,
    addresses: &[std::net::IpAddr],
    ports: &[&str],
    control: bool,
) -> Value {
    use crate::pipeline::fib::Target;
    let answers = addresses.iter().map(|&address| {
        let Some(explained) = fib.explain(crate::pipeline::fib::ip_destination(address)) else {
            // No route: the kernel answers net unreachable (with a control plane).
            let action = if control { "kernel" } else { "drop" };
            return json!({ "address": address.to_string(), "prefix": null, "action": action,
                "reason": "no_route", "next_hops": [] });
        };
        let (action, reason) = match explained.target {
            Target::Adjacency(_) | Target::Group(_) => ("forward", None),
            Target::Connected(_) if explained.hops.iter().any(|hop| hop.mac.is_some()) => ("forward", None),
            Target::Connected(_) | Target::Glean => ("glean", Some("unresolved")),
            Target::Local => ("kernel", Some("local")),
            Target::Blackhole => ("drop", Some("blackhole")),
            Target::Kernel(reason) => ("kernel", Some(reason.name())),
        };
        let next_hops: Vec<Value> = explained
            .hops
            .iter()
            .map(|hop| {
                json!({
                    "port": hop.port.map(|port| ports.get(usize::from(port)).copied().unwrap_or("?")),
                    "ip": hop.gateway.map(|ip| ip.to_string()),
                    "mac": hop.mac.map(|mac| mac.to_string()),
                    "weight": hop.weight,
                })
            })
            .collect();
        let (prefix, len) = explained.prefix;
        let behind = explained
            .waiting
            .map(|waiting| json!({ "metric": waiting.metric, "aliases": waiting.aliases, "others": waiting.others }));
        json!({ "address": address.to_string(), "prefix": format!("{prefix}/{len}"), "action": action,
            "reason": reason, "next_hops": next_hops, "behind": behind })
    });
    Value::Array(answers.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_comes_back_whole_over_pages_and_under_dpdks_string_limit() {
        let pager = Pager::default();
        let document = json!({ "fib": "10.0.0.0/24 connected p0\n".repeat(1000) });
        let mut built = 0;
        let mut bytes = Vec::new();
        let mut page = 0;
        loop {
            let reply = pager
                .answer(&format!("t1 fib {page}"), |view| {
                    built += 1;
                    (view == "fib").then(|| document.clone())
                })
                .unwrap();
            assert!(reply.len() <= crate::dpdk::TELEMETRY_TEXT_MAX, "{} bytes", reply.len());
            assert!(reply.bytes().all(|b| b.is_ascii_hexdigit() || b == b' '), "nothing JSON would escape");
            let (pages, hex) = reply.split_once(' ').unwrap();
            bytes.extend(
                hex.as_bytes()
                    .chunks(2)
                    .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap()),
            );
            page += 1;
            if page >= pages.parse().unwrap() {
                break;
            }
        }
        assert!(page > 1, "several pages");
        assert_eq!(built, 1, "built once, on page 0");
        assert!(pager.kept.is_empty(), "a document read to its end is let go");
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), document);
        assert!(pager.answer("t2 nothing 0", |_| None).is_none(), "an unknown view");
        assert!(pager.answer("t2 fib", |_| None).is_none(), "no page");
    }
}
