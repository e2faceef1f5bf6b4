//! The root tier: the control plane live, with Linux hosts, FRR and BIRD in network
//! namespaces: the lab they share (`lab`), the edge (`edge`), FRR and BFD (`bgp`), the FIB
//! against `ip route get` (`fib`, and the kernel's aliases: `aliases`), restarts that keep the sessions (`restart`), the keeper's faults (`faults`). Needs root, FRR, iproute2, ping, iperf3, hping3 and tshark
//! (`make deps`).
//!
//! Load: the tests run one at a time (`lab::alone`), and every one holds with a busy
//! neighbour on both CPUs: beside `stress-ng --cpu 2` on a two-CPU machine the whole tier
//! passed (2026-12-03, `make test-stressed` repeats it). What they rely on:
//! - raceway's control thread runs at real-time priority (nice -10 where that is refused), so
//!   punted BGP, BFD and ARP and the kernel's netlink reach it promptly whatever else runs;
//! - each timing has a stated margin: BFD at 100 ms x 3 is judged by the sessions' up/down
//!   counters before and after, not by a clock; the 2 s failover bound is far above what it
//!   takes under stress; the floods' CoPP classes are policed below what a starved hping3
//!   (nice 19) still sends; ping loss is counted by sequence number (`ping -O`), since ping's
//!   own summary counts the echo still in flight when it is stopped, which at tens of ms of
//!   round trip beside a busy neighbour is one echo in most runs.

#[path = "../bin.rs"]
mod bin;
#[path = "../../core/tests/util.rs"]
mod util;

mod aliases;
mod bgp;
mod edge;
mod faults;
mod fib;
mod lab;
mod oracle;
mod restart;
mod routes;
