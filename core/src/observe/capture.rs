//! Live capture (`run --capture PORT=FILE.pcapng`): workers copy the frames a port receives
//! and sends into preallocated records, and a writer thread off the forwarding cores turns
//! them into pcapng, one interface per captured port, each frame flagged inbound or outbound.
//!
//! Invariant: a worker never allocates, blocks or makes a syscall for a capture. It takes a
//! free record from a fixed pool (lock-free queue), copies the frame into it and hands it to
//! the writer; when the writer falls behind and no record is free, the frame is forwarded
//! uncaptured and counted in `not_captured`, never waited for. Every record goes back to the
//! pool after it is written, so the pool never grows.
//!
//! A capture is an observer: a file that cannot be written (a full disk) stops being written,
//! with one error line, and is reported in the summary (`CaptureSummary::failed`); the other
//! files go on, the writer keeps returning records to the pool, and forwarding never notices.

use crossbeam_queue::ArrayQueue;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::PcapNgWriter;
use std::borrow::Cow;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bytes kept of each frame: an mbuf's whole data room, so frames are captured whole.
pub const SNAPLEN: usize = 2048;
/// Records in the pool: about 64 MiB, 32 K frames of slack for the writer, which shares CPUs
/// with busy-polling workers: the demo (`make run`: host1 at 1 Gb/s in and out, about 1.1 M
/// frames in 4 s, on two CPUs with five DPDK processes) lost 63,925 of them with 4 K records.
const RECORDS: usize = 32_768;
/// The writer's buffer: one write(2) per megabyte rather than per 8 KiB.
const WRITE_BUFFER: usize = 1 << 20;
/// pcapng EPB flags: direction inbound (1) or outbound (2) in the low two bits.
const INBOUND: u32 = 1;
const OUTBOUND: u32 = 2;

/// One captured frame.
pub struct Record {
    port: u16,
    outbound: bool,
    tsc: u64,
    original_len: u32,
    captured_len: u16,
    bytes: [u8; SNAPLEN],
}

/// What a worker holds to capture: which ports, and the two queues of the record pool.
pub struct Tap {
    /// Bit n set: port n is captured.
    wanted: u64,
    free: Arc<ArrayQueue<Box<Record>>>,
    filled: Arc<ArrayQueue<Box<Record>>>,
    not_captured: Arc<AtomicU64>,
}

impl Tap {
    /// Whether frames of `port` are captured (checked once per burst).
    #[inline]
    pub fn wants(&self, port: usize) -> bool {
        port < 64 && self.wanted & (1 << port) != 0
    }

    /// Copies `frame`, seen on `port` at TSC `tsc`, into a free record for the writer.
    #[inline]
    pub fn copy(&self, port: usize, outbound: bool, tsc: u64, frame: &[u8]) {
        self.copy_head(port, outbound, tsc, frame, frame.len());
    }

    /// `copy` of a frame `len` bytes long of which `head` holds the first (a chained mbuf's
    /// first segment): the record keeps up to `SNAPLEN` bytes of `head` (a first segment of
    /// 2,048 bytes holds all the snap length keeps) and says the frame was `len` long.
    pub fn copy_head(&self, port: usize, outbound: bool, tsc: u64, head: &[u8], len: usize) {
        let Some(mut record) = self.free.pop() else {
            self.not_captured.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let kept = head.len().min(SNAPLEN);
        record.bytes[..kept].copy_from_slice(&head[..kept]);
        record.port = port as u16;
        record.outbound = outbound;
        record.tsc = tsc;
        record.original_len = len as u32;
        record.captured_len = kept as u16;
        // The pool holds RECORDS records in all, and `filled` has room for all of them.
        let _ = self.filled.push(record);
    }
}

/// One `--capture` request.
#[derive(Debug, Clone)]
pub struct CaptureRequest {
    pub port: usize,
    pub port_name: String,
    pub file: PathBuf,
}

/// A file being written, with the interface id of each of its ports.
struct Output {
    path: PathBuf,
    writer: PcapNgWriter<BufWriter<File>>,
    interfaces: Vec<(usize, u32)>,
    written: u64,
    /// Why the file stopped being written, once a write failed.
    failed: Option<String>,
}

/// What the writer did: frames written per file, and the files it stopped writing, with why.
struct Written {
    frames: Vec<(PathBuf, u64)>,
    failed: Vec<(PathBuf, String)>,
}

/// The running capture: the pool, the writer thread and its counters.
pub struct Capture {
    wanted: u64,
    free: Arc<ArrayQueue<Box<Record>>>,
    filled: Arc<ArrayQueue<Box<Record>>>,
    not_captured: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<Written>>,
}

/// What a capture did: frames written per file, frames not captured (no free record), and
/// the files that stopped being written, with why (the frames they would have had are not
/// counted anywhere else).
#[derive(Debug, Clone, Default)]
pub struct CaptureSummary {
    pub written: Vec<(PathBuf, u64)>,
    pub not_captured: u64,
    pub failed: Vec<(PathBuf, String)>,
}

fn write_error(path: &Path, err: pcap_file::PcapError) -> String {
    // pcap_file says "Error reading bytes" for any I/O error: the I/O error says what it was.
    match err {
        pcap_file::PcapError::IoError(err) => format!("{}: cannot write the capture: {err}", path.display()),
        other => format!("{}: cannot write the capture: {other}", path.display()),
    }
}

impl Capture {
    /// Creates the files (one interface per captured port) and starts the writer thread.
    /// `tsc_hz` converts the workers' TSC stamps to wall-clock time.
    pub fn start(requests: &[CaptureRequest], tsc_hz: u64, tsc_now: u64) -> Result<Self, String> {
        let mut outputs: Vec<Output> = Vec::new();
        let mut wanted = 0u64;
        for request in requests {
            if request.port >= 64 {
                return Err(format!("--capture {}: only the first 64 ports can be captured", request.port_name));
            }
            wanted |= 1 << request.port;
            let index = match outputs.iter().position(|o| o.path == request.file) {
                Some(index) => index,
                None => {
                    let file = File::create(&request.file)
                        .map_err(|err| format!("{}: cannot create: {err}", request.file.display()))?;
                    let writer = PcapNgWriter::new(BufWriter::with_capacity(WRITE_BUFFER, file))
                        .map_err(|e| write_error(&request.file, e))?;
                    outputs.push(Output {
                        path: request.file.clone(),
                        writer,
                        interfaces: Vec::new(),
                        written: 0,
                        failed: None,
                    });
                    outputs.len() - 1
                }
            };
            let output = &mut outputs[index];
            let interface = crate::traffic::pcap::ethernet_interface(&request.port_name, SNAPLEN as u32);
            output.writer.write_pcapng_block(interface).map_err(|e| write_error(&request.file, e))?;
            output.interfaces.push((request.port, output.interfaces.len() as u32));
        }
        let free = Arc::new(ArrayQueue::new(RECORDS));
        for _ in 0..RECORDS {
            let record = Box::new(Record {
                port: 0,
                outbound: false,
                tsc: 0,
                original_len: 0,
                captured_len: 0,
                bytes: [0; SNAPLEN],
            });
            let _ = free.push(record);
        }
        let filled = Arc::new(ArrayQueue::new(RECORDS));
        let stop = Arc::new(AtomicBool::new(false));
        let epoch_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
        let clock = Clock { tsc_zero: tsc_now, epoch_ns, tsc_hz: tsc_hz.max(1) };
        let (thread_free, thread_filled, thread_stop) = (Arc::clone(&free), Arc::clone(&filled), Arc::clone(&stop));
        let writer = std::thread::Builder::new()
            .name("raceway-capture".into())
            .spawn(move || write_records(outputs, &thread_free, &thread_filled, &thread_stop, clock))
            .map_err(|err| format!("--capture: cannot start the writer thread: {err}"))?;
        Ok(Self { wanted, free, filled, not_captured: Arc::new(AtomicU64::new(0)), stop, writer: Some(writer) })
    }

    /// A tap for one worker.
    pub fn tap(&self) -> Tap {
        Tap {
            wanted: self.wanted,
            free: Arc::clone(&self.free),
            filled: Arc::clone(&self.filled),
            not_captured: Arc::clone(&self.not_captured),
        }
    }

    /// Writes what is left (after the workers stopped), closes the files, and reports.
    pub fn finish(mut self) -> Result<CaptureSummary, String> {
        self.stop.store(true, Ordering::Release);
        let written = match self.writer.take().map(std::thread::JoinHandle::join) {
            Some(Ok(written)) => written,
            Some(Err(_)) => return Err("--capture: the writer thread panicked".into()),
            None => Written { frames: Vec::new(), failed: Vec::new() },
        };
        let not_captured = self.not_captured.load(Ordering::Relaxed);
        Ok(CaptureSummary { written: written.frames, not_captured, failed: written.failed })
    }
}

/// TSC stamps to wall-clock nanoseconds.
#[derive(Clone, Copy)]
struct Clock {
    tsc_zero: u64,
    epoch_ns: u64,
    tsc_hz: u64,
}

impl Clock {
    fn nanos(&self, tsc: u64) -> u64 {
        let ticks = u128::from(tsc.saturating_sub(self.tsc_zero));
        self.epoch_ns + (ticks * 1_000_000_000 / u128::from(self.tsc_hz)) as u64
    }
}

/// The writer thread: records to pcapng until stopped and drained; returns frames per file.
fn write_records(
    mut outputs: Vec<Output>,
    free: &ArrayQueue<Box<Record>>,
    filled: &ArrayQueue<Box<Record>>,
    stop: &AtomicBool,
    clock: Clock,
) -> Written {
    loop {
        let Some(record) = filled.pop() else {
            if stop.load(Ordering::Acquire) && filled.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
            continue;
        };
        for output in outputs.iter_mut().filter(|output| output.failed.is_none()) {
            let Some(&(_, interface)) = output.interfaces.iter().find(|(port, _)| *port == usize::from(record.port))
            else {
                continue;
            };
            let block = EnhancedPacketBlock {
                interface_id: interface,
                timestamp: Duration::from_nanos(clock.nanos(record.tsc)),
                original_len: record.original_len,
                data: Cow::Borrowed(&record.bytes[..usize::from(record.captured_len)]),
                options: vec![EnhancedPacketOption::Flags(if record.outbound { OUTBOUND } else { INBOUND })],
            };
            match output.writer.write_pcapng_block(block) {
                Ok(_) => output.written += 1,
                Err(err) => {
                    let why = write_error(&output.path, err);
                    stop_writing(output, why);
                }
            }
        }
        let _ = free.push(record);
    }
    let mut written = Written { frames: Vec::new(), failed: Vec::new() };
    for mut output in outputs {
        if output.failed.is_none() {
            if let Err(err) = std::io::Write::flush(output.writer.get_mut()) {
                let why = format!("{}: cannot write the capture: {err}", output.path.display());
                stop_writing(&mut output, why);
            }
        }
        written.frames.push((output.path.clone(), output.written));
        written.failed.extend(output.failed.map(|why| (output.path, why)));
    }
    written
}

/// A file that cannot be written: said once, and written no more (frames already buffered for
/// it may be lost with it).
fn stop_writing(output: &mut Output, why: String) {
    tracing::error!("{why}; this file is no longer written, forwarding goes on");
    output.failed = Some(why);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
    use pcap_file::pcapng::{Block, PcapNgReader};

    #[test]
    fn records_become_pcapng_with_direction_flags_and_the_pool_never_grows() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.pcapng");
        let requests = [
            CaptureRequest { port: 0, port_name: "host0".into(), file: file.clone() },
            CaptureRequest { port: 2, port_name: "up0".into(), file: file.clone() },
        ];
        let capture = Capture::start(&requests, 1_000_000_000, 0).unwrap();
        let tap = capture.tap();
        assert!(tap.wants(0) && tap.wants(2) && !tap.wants(1));
        tap.copy(0, false, 1_000, &[0xaa; 60]);
        tap.copy(2, true, 2_000, &[0xbb; 3000]); // longer than SNAPLEN: cut, original length kept
        let summary = capture.finish().unwrap();
        assert_eq!(summary.written, vec![(file.clone(), 2)]);
        assert_eq!(summary.not_captured, 0);
        let mut reader = PcapNgReader::new(File::open(&file).unwrap()).unwrap();
        let mut interfaces = Vec::new();
        let mut packets = Vec::new();
        while let Some(block) = reader.next_block() {
            match block.unwrap() {
                Block::InterfaceDescription(idb) => {
                    interfaces.push(idb.options.iter().map(|o| format!("{o:?}")).collect::<Vec<_>>())
                }
                Block::EnhancedPacket(epb) => packets.push((
                    epb.interface_id,
                    epb.original_len,
                    epb.data.len(),
                    epb.options.iter().map(|o| format!("{o:?}")).collect::<Vec<_>>(),
                )),
                _ => {}
            }
        }
        assert_eq!(interfaces.len(), 2);
        assert!(interfaces[1].contains(&format!("{:?}", InterfaceDescriptionOption::IfName(Cow::Borrowed("up0")))));
        assert_eq!(packets.len(), 2);
        assert_eq!((packets[0].0, packets[0].1, packets[0].2), (0, 60, 60));
        assert_eq!(packets[0].3, vec![format!("{:?}", EnhancedPacketOption::Flags(INBOUND))]);
        assert_eq!((packets[1].0, packets[1].1, packets[1].2), (1, 3000, SNAPLEN));
        assert_eq!(packets[1].3, vec![format!("{:?}", EnhancedPacketOption::Flags(OUTBOUND))]);
    }

    #[test]
    fn a_full_pool_counts_frames_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let requests = [CaptureRequest { port: 0, port_name: "p".into(), file: dir.path().join("f.pcapng") }];
        let capture = Capture::start(&requests, 1_000_000_000, 0).unwrap();
        // Take every free record away, as a writer far behind would.
        let hoard: Vec<_> = std::iter::from_fn(|| capture.free.pop()).collect();
        assert_eq!(hoard.len(), RECORDS);
        capture.tap().copy(0, false, 0, &[1; 60]);
        for record in hoard {
            let _ = capture.free.push(record);
        }
        assert_eq!(capture.finish().unwrap().not_captured, 1);
    }

    /// A file that cannot be written (here /dev/full, a disk always full) stops being
    /// written and is reported; the other file is written whole and every record returns to
    /// the pool.
    #[test]
    fn a_file_that_cannot_be_written_stops_alone_and_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.pcapng");
        let full = PathBuf::from("/dev/full");
        let requests = [
            CaptureRequest { port: 0, port_name: "host0".into(), file: good.clone() },
            CaptureRequest { port: 1, port_name: "host1".into(), file: full.clone() },
        ];
        let capture = Capture::start(&requests, 1_000_000_000, 0).unwrap();
        let tap = capture.tap();
        // More than the write buffer holds, so /dev/full refuses a write before the end.
        for index in 0..1_000u64 {
            tap.copy(0, false, index, &[0xaa; 1500]);
            tap.copy(1, false, index, &[0xbb; 1500]);
        }
        let free = Arc::clone(&capture.free);
        let summary = capture.finish().unwrap();
        assert_eq!(summary.written[0], (good.clone(), 1_000));
        assert_eq!(summary.failed.len(), 1, "{summary:?}");
        assert_eq!(summary.failed[0].0, full);
        assert!(summary.failed[0].1.contains("No space left on device"), "{summary:?}");
        assert_eq!(free.len(), RECORDS, "every record back in the pool");
        let mut reader = PcapNgReader::new(File::open(&good).unwrap()).unwrap();
        let mut packets = 0;
        while let Some(block) = reader.next_block() {
            packets += usize::from(matches!(block.unwrap(), Block::EnhancedPacket(_)));
        }
        assert_eq!(packets, 1_000);
    }
}
