//! The writers: replay's output captures, pcap or pcapng.

use super::*;
use crate::error::InputError;
use pcap_file::pcap::PcapHeader;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::{DataLink, TsResolution};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A pcapng interface description for an Ethernet port named `name`, with nanosecond
/// timestamps (what pcap-file writes) and `snaplen` (0: no limit): the one every raceway
/// pcapng file uses, replay's output and the live capture alike.
pub fn ethernet_interface(name: &str, snaplen: u32) -> InterfaceDescriptionBlock<'static> {
    InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen,
        options: vec![
            InterfaceDescriptionOption::IfName(name.to_string().into()),
            InterfaceDescriptionOption::IfTsResol(9),
        ],
    }
}

/// The format of replay's output captures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// Ethernet pcap, nanosecond timestamps: `<port>.pcap`.
    #[default]
    Pcap,
    /// pcapng, one interface (the port: its name, nanosecond `if_tsresol`), every frame
    /// flagged outbound: `<port>.pcapng`.
    PcapNg,
}

impl OutputFormat {
    pub fn extension(self) -> &'static str {
        match self {
            Self::Pcap => "pcap",
            Self::PcapNg => "pcapng",
        }
    }
}

/// Writes a port's frames to a capture with nanosecond timestamps.
pub struct CaptureWriter {
    path: PathBuf,
    writer: Writer,
    /// Added to every timestamp: the inputs' origin (`read_traces`).
    origin_ns: u64,
}

enum Writer {
    Pcap(BufWriter<File>),
    PcapNg(pcap_file::pcapng::PcapNgWriter<BufWriter<File>>),
}

/// The output buffer of a capture, in bytes: 64 B replays ran fastest from 256 KiB to 1 MiB
/// (8 KiB: 1.30 s, 64 KiB: 1.11 s, 256 KiB: 1.07 s, 4 MiB: 1.16 s for 5 M frames).
const WRITE_BUFFER: usize = 1 << 18;

/// The enhanced packet block flag of a frame the interface sent.
const OUTBOUND: u32 = 2;

impl CaptureWriter {
    /// A pcap whose timestamps count from `origin_ns` (the inputs' origin, so that output
    /// and input captures share one clock).
    pub fn create(path: &Path, origin_ns: u64) -> Result<Self, InputError> {
        Self::create_as(path, origin_ns, OutputFormat::Pcap, "")
    }

    /// A capture in `format`; a pcapng file describes one interface named `port`.
    pub fn create_as(path: &Path, origin_ns: u64, format: OutputFormat, port: &str) -> Result<Self, InputError> {
        let error = |problem: String| InputError::whole_file(path.display(), problem);
        // Large writes: with BufWriter's default 8 KiB, writes end mid-page and ext4 zeroes
        // the rest of each new page first (perf/RESULTS.md, "Figures once in code comments").
        let file = BufWriter::with_capacity(
            WRITE_BUFFER,
            File::create(path).map_err(|err| error(format!("cannot create: {err}")))?,
        );
        let writer = match format {
            OutputFormat::Pcap => {
                let header = PcapHeader {
                    datalink: DataLink::ETHERNET,
                    ts_resolution: TsResolution::NanoSecond,
                    snaplen: 65535,
                    endianness: pcap_file::Endianness::Big,
                    ..PcapHeader::default()
                };
                let mut file = file;
                header.write_to(&mut file).map_err(|err| error(first_line(err)))?;
                Writer::Pcap(file)
            }
            OutputFormat::PcapNg => {
                let mut writer = pcap_file::pcapng::PcapNgWriter::new(file).map_err(|err| error(first_line(err)))?;
                writer.write_pcapng_block(ethernet_interface(port, 0)).map_err(|err| error(first_line(err)))?;
                Writer::PcapNg(writer)
            }
        };
        Ok(Self { path: path.to_path_buf(), writer, origin_ns })
    }

    pub fn write(&mut self, time_ps: u64, bytes: &[u8]) -> Result<(), InputError> {
        let timestamp = Duration::from_nanos(time_ps / 1000 + self.origin_ns);
        let written = match &mut self.writer {
            Writer::Pcap(writer) => write_record(writer, timestamp, bytes).map_err(first_line),
            Writer::PcapNg(writer) => writer
                .write_pcapng_block(pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp,
                    original_len: bytes.len() as u32,
                    data: std::borrow::Cow::Borrowed(bytes),
                    options: vec![EnhancedPacketOption::Flags(OUTBOUND)],
                })
                .map(|_| ())
                .map_err(first_line),
        };
        written.map_err(|problem| InputError::whole_file(self.path.display(), problem))
    }

    pub fn finish(self) -> Result<(), InputError> {
        let path = self.path;
        let mut inner = match self.writer {
            Writer::Pcap(writer) => writer,
            Writer::PcapNg(writer) => writer.into_inner(),
        };
        std::io::Write::flush(&mut inner).map_err(|err| InputError::whole_file(path.display(), err.to_string()))
    }
}

/// Writes one pcap record (big-endian, as the file header says and as raceway's captures
/// always were; nanosecond timestamps): the 16-byte record header and the frame, straight
/// into the buffered file.
fn write_record(writer: &mut BufWriter<File>, timestamp: Duration, bytes: &[u8]) -> std::io::Result<()> {
    let seconds = u32::try_from(timestamp.as_secs()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "a timestamp after 2106 does not fit pcap's seconds")
    })?;
    let length = bytes.len() as u32;
    let mut header = [0u8; 16];
    header[..4].copy_from_slice(&seconds.to_be_bytes());
    header[4..8].copy_from_slice(&timestamp.subsec_nanos().to_be_bytes());
    header[8..12].copy_from_slice(&length.to_be_bytes());
    header[12..].copy_from_slice(&length.to_be_bytes());
    std::io::Write::write_all(writer, &header)?;
    std::io::Write::write_all(writer, bytes)
}
