//! The DPDK glue's rules, checked at run time in a process of its own (the EAL starts once
//! per process, so these checks cannot share a test binary with anything else that starts it):
//! a queue has one handle at a time, a handle keeps its port open, and a pool released while
//! some of its mbufs are still out is kept rather than freed. What the types rule out at
//! compile time (a second handle by cloning) is `compile_fail` doc tests on `RxQueue` and
//! `PortTx`.

use raceway::dpdk::{self, Burst, Eal, Mempool, Port, TxQueues};
use std::sync::Arc;

#[test]
fn queue_handles_are_claimed_once_and_pools_with_mbufs_out_are_kept() {
    let prefix = format!("raceway-eal-test-{}", std::process::id());
    let device = format!("net_null_eal{}", std::process::id() % 10_000);
    let args: Vec<String> =
        ["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "-l", "0", "--file-prefix", &prefix, "--vdev", &device]
            .iter()
            .map(|arg| arg.to_string())
            .collect();
    let eal = Eal::init(&args).expect("EAL on a null vdev");
    let pool = Arc::new(Mempool::new(&eal, "eal_test", 1023, 0, 2048, -1).expect("a pool"));
    let id = Port::find(&device).expect("the vdev");
    let port = Arc::new(Port::start(id, "t", &pool, 1, 0, TxQueues::One).expect("the port starts"));

    // One handle per queue at a time; none for a queue the port does not have.
    let mut rx = port.rx_queue(0).expect("rx queue 0");
    assert!(port.rx_queue(0).is_none(), "a second handle to a polled queue");
    assert!(port.rx_queue(1).is_none(), "a queue the port did not open");
    let mut tx = port.transmitter().expect("the transmitter");
    assert!(port.transmitter().is_none(), "a second transmitter");

    // The handles burst: net_null receives frames it makes, and frees what it sends.
    let mut burst = Burst::default();
    let received = rx.burst(&mut burst);
    assert!(received > 0, "net_null always has frames");
    assert_eq!(tx.burst(&mut burst), received, "net_null takes a whole burst");
    assert!(burst.is_empty());
    assert_eq!(pool.available(), pool.size(), "every mbuf back in the pool");

    // A dropped handle gives its queue back.
    drop(rx);
    let rx = port.rx_queue(0).expect("rx queue 0 again, once its handle is gone");

    // The handles hold the port: dropping our own `Arc` does not close it under them.
    drop(port);
    drop((rx, tx));

    // A pool released with an mbuf still out is kept, so the late free lands in a live pool.
    let late = pool.alloc().expect("an mbuf");
    assert_eq!(dpdk::pools_kept(), 0);
    drop(pool);
    assert_eq!(dpdk::pools_kept(), 1, "the pool was kept, not freed");
    drop(late);
    drop(eal);
}
