//! sFlow from a live switch to real collectors: pmacct's `sfacctd` estimates each source's
//! frames from the samples, and tshark's sFlow dissector reads every datagram.

use super::*;
use crate::util::*;

/// A relay between the switch and sfacctd: records each datagram (for tshark) and passes it
/// on. Returns the datagrams once `stop` is set.
fn relay(
    socket: std::net::UdpSocket,
    to: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<Vec<u8>> {
    socket.set_read_timeout(Some(std::time::Duration::from_millis(50))).unwrap();
    let mut datagrams = Vec::new();
    let mut buffer = [0u8; 65536];
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if let Ok((len, _)) = socket.recv_from(&mut buffer) {
            socket.send_to(&buffer[..len], to).unwrap();
            datagrams.push(buffer[..len].to_vec());
        }
    }
    datagrams
}

/// The datagrams as a pcap of IPv4/UDP packets (link type raw IP) to port `port`, for tshark.
fn datagrams_pcap(path: &std::path::Path, datagrams: &[Vec<u8>], port: u16) {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let header = PcapHeader { datalink: pcap_file::DataLink::RAW, ..Default::default() };
    let mut writer = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (index, datagram) in datagrams.iter().enumerate() {
        let total = (20 + 8 + datagram.len()) as u16;
        let mut packet = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1];
        packet[2..4].copy_from_slice(&total.to_be_bytes());
        packet.extend_from_slice(&6343u16.to_be_bytes());
        packet.extend_from_slice(&port.to_be_bytes());
        packet.extend_from_slice(&(total - 20).to_be_bytes());
        packet.extend_from_slice(&[0, 0]);
        packet.extend_from_slice(datagram);
        let time = std::time::Duration::from_millis(index as u64);
        writer.write_packet(&PcapPacket::new(time, packet.len() as u32, &packet)).unwrap();
    }
}

/// The dropped-packet notifications (format 5 samples) of `datagrams`: (drops lost before it,
/// input ifIndex, output ifIndex, reason) each. tshark's dissector does not read them yet.
fn discards(datagrams: &[Vec<u8>]) -> Vec<(u32, u32, u32, u32)> {
    let word = |bytes: &[u8], at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let mut found = Vec::new();
    for datagram in datagrams {
        let address_len = if word(datagram, 4) == 1 { 4 } else { 16 };
        let samples = word(datagram, 8 + address_len + 12);
        let mut at = 8 + address_len + 16;
        for _ in 0..samples {
            let (tag, len) = (word(datagram, at), word(datagram, at + 4) as usize);
            let body = &datagram[at + 8..at + 8 + len];
            if tag == 5 {
                found.push((word(body, 12), word(body, 16), word(body, 20), word(body, 24)));
            }
            at += 8 + len;
        }
    }
    found
}

/// Whether a UDP socket is bound to 127.0.0.1:`port` (/proc/net/udp lists the address as
/// hex, "0100007F:PPPP"), and the bytes queued on it unread.
fn udp_socket_queue(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl, local_address, rem_address, st, tx_queue:rx_queue, ...
        (fields.get(1) == Some(&local.as_str()))
            .then(|| u64::from_str_radix(fields[4].split_once(':').unwrap().1, 16).unwrap())
    })
}

/// 20,000 frames from four sources (5,000 each) through a live switch sampling 1 in 50 on
/// the port they enter: sfacctd's renormalized estimate of each source is within five
/// standard deviations of 5,000 (the samples of a source are binomial, 100 expected, so a
/// deviation of about 10 samples, 500 frames), tshark reads each flow sample's rate, pool
/// and ports, and the counter samples carry the ports' frame counts. An ACL drops one
/// source's 5,000 frames: they are still sampled as received, and become dropped-packet
/// notifications with reason `acl` (258) up to `drop_limit`, 100 a second (a full bucket of
/// 100 at the start, the drops lasting a fraction of a second), the rest counted as lost.
#[test]
fn sflow_samples_reach_real_collectors_within_statistical_bounds() {
    const RATE: u64 = 50;
    let _cpus = cpus_shared();
    let dir = temp_dir("live-sflow");
    let trace = dir.join("flows.pcap");
    run_ok(
        raceway()
            .args(["gen", "flows", "--flows", "4", "--packets", "20000", "--size", "200", "--dscp", "0", "--out"])
            .arg(&trace),
    );
    // sfacctd on a port of its own, printing each source's renormalized frames.
    let sfacctd_port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let csv = dir.join("sources.csv");
    let collector_config = dir.join("sfacctd.conf");
    std::fs::write(
        &collector_config,
        format!(
            "daemonize: false\nsfacctd_ip: 127.0.0.1\nsfacctd_port: {sfacctd_port}\nsfacctd_renormalize: true\n\
             plugins: print[sources]\naggregate[sources]: src_host\nprint_output[sources]: csv\n\
             print_output_file[sources]: {}\nprint_refresh_time[sources]: 1\n\
             print_output_file_append[sources]: true\npidfile: {}\nlogfile: {}\n",
            csv.display(),
            dir.join("sfacctd.pid").display(),
            dir.join("sfacctd.log").display()
        ),
    )
    .unwrap();
    let mut sfacctd = KillOnDrop(
        std::process::Command::new("sfacctd")
            .arg("-f")
            .arg(&collector_config)
            .spawn()
            .expect("sfacctd (Debian's pmacct)"),
    );
    // A datagram sent before sfacctd binds is refused and lost.
    wait_until("sfacctd never bound its port", std::time::Duration::from_secs(60), || {
        udp_socket_queue(sfacctd_port).is_some()
    });
    let relay_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let relay_port = relay_socket.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relay_stop = std::sync::Arc::clone(&stop);
    let relaying = std::thread::spawn(move || relay(relay_socket, ([127, 0, 0, 1], sfacctd_port).into(), relay_stop));
    let devices = with_null_sinks(format!("net_pcap70,rx_pcap={}", trace.display()), 70);
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config = dir.join("leaf.toml");
    let sflow = format!(
        "[sflow]\ncollector = \"127.0.0.1:{relay_port}\"\nagent = \"10.9.0.1\"\nsampling_rate = {RATE}\npolling_interval_s = 1\n\
         [[acl]]\nname = \"drop-one\"\nports = [\"host0\"]\n[[acl.rule]]\npriority = 1\nsrc = \"10.0.0.4/32\"\naction = \"drop\"\n"
    );
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal) + &sflow)
        .unwrap();
    let stats = run_live(&dir, &config, "sflow", &[]);
    // The last counter samples went at the latest a second before the end.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let datagrams = relaying.join().unwrap();
    let received = stats["ports"]["host0"]["rx_packets"].as_u64().unwrap();
    assert_eq!(received, 20_000);
    assert_eq!(stats["ports"]["host0"]["drops"]["acl"], 5_000);
    let notified = discards(&datagrams);
    assert!((100..=150).contains(&notified.len()), "{} notifications of 5,000 drops", notified.len());
    assert!(notified.iter().all(|&(_, input, output, reason)| (input, output, reason) == (1, 0, 258)), "{notified:?}");
    let lost = notified.iter().map(|&(lost, ..)| lost).max().unwrap();
    assert!(lost > 0 && lost <= 5_000 - notified.len() as u32, "lost before the last notification: {lost}");
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"]);

    // tshark: every flow sample's rate and input port; the last counter samples' frames.
    let pcap = dir.join("sflow.pcap");
    datagrams_pcap(&pcap, &datagrams, relay_port);
    let decoded = std::process::Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-d", &format!("udp.port=={relay_port},sflow"), "-T", "fields", "-E", "occurrence=a"])
        .args([
            "-e",
            "sflow.flow_sample.sampling_rate",
            "-e",
            "sflow.flow_sample.input_interface",
            "-e",
            "sflow_245.ifinpkt",
        ])
        .output()
        .unwrap();
    assert!(decoded.status.success(), "{}", String::from_utf8_lossy(&decoded.stderr));
    let text = String::from_utf8_lossy(&decoded.stdout);
    let column = |index: usize| -> Vec<u64> {
        text.lines()
            .filter_map(|line| line.split('\t').nth(index))
            .flat_map(|field| field.split(',').filter_map(|value| value.parse().ok()).collect::<Vec<u64>>())
            .collect()
    };
    let (rates, inputs, in_packets) = (column(0), column(1), column(2));
    let samples = rates.len() as u64;
    // 400 expected; binomial, a deviation of about 20.
    assert!((300..=500).contains(&samples), "{samples} flow samples of 20,000 frames at 1 in {RATE}");
    assert!(rates.iter().all(|&rate| rate == RATE), "{rates:?}");
    assert!(inputs.iter().all(|&input| input == 1), "host0 is ifIndex 1: {inputs:?}");
    assert!(in_packets.contains(&20_000), "a counter sample with host0's 20,000 frames: {in_packets:?}");

    // sfacctd: each source's frames, estimated from its samples. It has read every datagram
    // when its socket's queue is empty; it prints what it holds as it exits.
    wait_until("sfacctd never read its socket", std::time::Duration::from_secs(60), || {
        udp_socket_queue(sfacctd_port) == Some(0)
    });
    signal(sfacctd.0.id(), "INT");
    sfacctd.wait_for_exit();
    let printed = std::fs::read_to_string(&csv)
        .unwrap_or_else(|err| panic!("{}: {err}; log: {}", csv.display(), read(&dir.join("sfacctd.log"))));
    // Each refresh (every second) appends what arrived since the one before: a source's
    // estimate is the sum of its lines.
    let mut estimates: Vec<(String, u64)> = Vec::new();
    for line in printed.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let frames = fields[1].parse::<u64>().unwrap();
        match estimates.iter_mut().find(|(source, _)| source == fields[0]) {
            Some((_, sum)) => *sum += frames,
            None => estimates.push((fields[0].to_string(), frames)),
        }
    }
    eprintln!(
        "sflow: {samples} flow samples and {} drop notifications in {} datagrams; sfacctd's estimates {estimates:?}",
        notified.len(),
        datagrams.len()
    );
    assert_eq!(estimates.len(), 4, "{printed}");
    for (source, frames) in &estimates {
        assert!((2_500..=7_500).contains(frames), "{source}: {frames} estimated of 5,000: {printed}");
    }
}
