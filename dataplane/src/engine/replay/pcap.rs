//! Reading input traces and writing output captures for replay.
//!
//! Invariant: a trace is either read whole, with timestamps in picoseconds, or rejected with
//! one `InputError` naming the file, the record and the problem; output captures are Ethernet
//! pcaps with nanosecond timestamps.

use crate::error::InputError;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A frame offered at `time_ps`.
pub struct TraceFrame {
    pub time_ps: u64,
    pub bytes: Vec<u8>,
}

fn first_line(err: impl fmt::Display) -> String {
    err.to_string().lines().next().unwrap_or("").to_string()
}

/// Reads a whole Ethernet pcap (micro- or nanosecond timestamps).
pub fn read_trace(path: &Path) -> Result<Vec<TraceFrame>, InputError> {
    let error = |field: String, problem: String| InputError { file: path.display().to_string(), field, problem };
    let file = File::open(path).map_err(|err| error("-".into(), format!("cannot open: {err}")))?;
    let mut reader = PcapReader::new(BufReader::new(file))
        .map_err(|err| error("header".into(), format!("not a pcap file: {}", first_line(err))))?;
    let datalink = reader.header().datalink;
    if datalink != DataLink::ETHERNET {
        return Err(error("header.linktype".into(), format!("{datalink:?} is not Ethernet")));
    }
    let mut frames = Vec::new();
    while let Some(packet) = reader.next_packet() {
        let record = frames.len();
        let packet = packet.map_err(|err| error(format!("record {record}"), first_line(err)))?;
        let time_ps = u64::try_from(packet.timestamp.as_nanos())
            .ok()
            .and_then(|ns| ns.checked_mul(1000))
            .ok_or_else(|| error(format!("record {record}"), "timestamp out of range".into()))?;
        frames.push(TraceFrame { time_ps, bytes: packet.data.into_owned() });
    }
    Ok(frames)
}

/// Writes frames to an Ethernet pcap with nanosecond timestamps.
pub struct CaptureWriter {
    path: PathBuf,
    writer: PcapWriter<BufWriter<File>>,
}

impl CaptureWriter {
    pub fn create(path: &Path) -> Result<Self, InputError> {
        let error = |problem: String| InputError { file: path.display().to_string(), field: "-".into(), problem };
        let file = File::create(path).map_err(|err| error(format!("cannot create: {err}")))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            snaplen: 65535,
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(BufWriter::new(file), header).map_err(|err| error(first_line(err)))?;
        Ok(Self { path: path.to_path_buf(), writer })
    }

    pub fn write(&mut self, time_ps: u64, bytes: &[u8]) -> Result<(), InputError> {
        let packet = PcapPacket::new(Duration::from_nanos(time_ps / 1000), bytes.len() as u32, bytes);
        self.writer.write_packet(&packet).map(|_| ()).map_err(|err| InputError {
            file: self.path.display().to_string(),
            field: "-".into(),
            problem: first_line(err),
        })
    }

    pub fn finish(self) -> Result<(), InputError> {
        let path = self.path;
        let mut inner = self.writer.into_writer();
        std::io::Write::flush(&mut inner).map_err(|err| InputError {
            file: path.display().to_string(),
            field: "-".into(),
            problem: err.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_nanoseconds() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let path = dir.join("t.pcap");
        let mut writer = CaptureWriter::create(&path).unwrap();
        writer.write(1_234_567_000, &[1, 2, 3]).unwrap();
        writer.write(1_234_568_000, &[4; 60]).unwrap();
        writer.finish().unwrap();
        let frames = read_trace(&path).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].time_ps, 1_234_567_000);
        assert_eq!(frames[1].bytes, vec![4; 60]);
    }

    #[test]
    fn bad_files_give_one_line() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let path = dir.join("bad.pcap");
        std::fs::write(&path, b"not a capture at all, just text").unwrap();
        let err = read_trace(&path).err().unwrap();
        assert_eq!(err.field, "header");
        assert!(!err.to_string().contains('\n'));

        let good = dir.join("good.pcap");
        let mut writer = CaptureWriter::create(&good).unwrap();
        writer.write(0, &[7; 60]).unwrap();
        writer.write(1000, &[7; 60]).unwrap();
        writer.finish().unwrap();
        let mut bytes = std::fs::read(&good).unwrap();
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&path, &bytes).unwrap();
        let err = read_trace(&path).err().unwrap();
        assert_eq!(err.field, "record 1", "{err}");

        assert_eq!(read_trace(&dir.join("missing.pcap")).err().unwrap().field, "-");
    }
}
