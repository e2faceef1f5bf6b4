//! The dpdk tier: the `raceway` binary as an operator runs it, and the live engine on DPDK
//! vdevs: the command line and its errors (`cli`), hostile input (`hostile`), the fabric
//! simulator's command (`fabric`), live runs on net_pcap, net_memif and net_null (`live`), the
//! DPDK glue's rules in this process (`eal`: the only test here that starts the EAL, once),
//! the pktgen sweep script (`pktgen`, needs lua5.3), and the fabric simulator split over
//! MPI ranks (`ranks`, with the `mpi` feature; needs Open MPI's mpirun). Needs DPDK and root
//! for the EAL's memory; no network namespaces (those are the root tier's).

#[path = "../bin.rs"]
mod bin;
#[path = "../../core/tests/util.rs"]
mod util;

mod cli;
mod eal;
mod fabric;
mod hostile;
mod live;
mod pktgen;
#[cfg(feature = "mpi")]
mod ranks;
