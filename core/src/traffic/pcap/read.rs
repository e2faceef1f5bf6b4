//! The readers: pcap and pcapng records as frames with picosecond timestamps, and several
//! inputs merged in time order.

use super::*;
use crate::error::InputError;
use pcap_file::pcap::PcapHeader;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, TsResolution};
use std::fs::File;
use std::io::{Read, Seek};

/// A frame offered at `time_ps`, counted from the replay's origin.
pub struct TraceFrame {
    pub time_ps: u64,
    pub bytes: Vec<u8>,
}

/// A frame as its file timestamps it: picoseconds since the capture's epoch (Unix time for
/// tcpdump and Wireshark, which is more picoseconds than a u64 holds).
pub struct CapturedFrame {
    pub time_ps: u128,
    pub bytes: Vec<u8>,
}

/// The first four bytes of a pcapng file (a section header block's type).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// A file that counts the bytes read from it (for the progress bar).
struct Counted {
    /// The file (a reader in tests, to stage short and interrupted reads).
    file: Box<dyn Read>,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl Read for Counted {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.file.read(buffer)?;
        self.read.set(self.read.get() + read as u64);
        Ok(read)
    }
}

/// Reads an input trace frame by frame.
pub struct TraceReader {
    file: String,
    format: Format,
    /// Bytes read from the file so far.
    read: std::rc::Rc<std::cell::Cell<u64>>,
    /// Records (pcap) or blocks (pcapng) read so far, for error messages.
    position: usize,
}

enum Format {
    Pcap(Box<PcapRecords>),
    PcapNg(Box<PcapNgState>),
}

struct PcapNgState {
    reader: PcapNgReader<Counted>,
    interface: Option<InterfaceChoice>,
    direction: Option<Direction>,
    /// The time of the last frame read (for simple packet blocks, which carry none).
    last_ps: u128,
    /// Whether an interface description matched the choice (else, at the end, the choice
    /// named no interface of the file).
    found_interface: bool,
}

/// An interface's timestamp unit and offset, in picoseconds.
struct Clock {
    /// (numerator, denominator): a timestamp unit is numerator / denominator ps.
    unit: (u128, u128),
    offset_ps: u128,
}

impl Clock {
    fn of(interface: &InterfaceDescriptionBlock) -> Self {
        let mut resolution = 6u8;
        let mut offset_s = 0u64;
        for option in &interface.options {
            match option {
                InterfaceDescriptionOption::IfTsResol(value) => resolution = *value,
                InterfaceDescriptionOption::IfTsOffset(value) => offset_s = *value,
                _ => {}
            }
        }
        // Most significant bit set: a power of two; else a power of ten (of a second).
        let unit = if resolution & 0x80 != 0 {
            (1_000_000_000_000, 1u128 << (resolution & 0x7f).min(127))
        } else if resolution <= 12 {
            (10u128.pow(12 - u32::from(resolution)), 1)
        } else {
            (1, 10u128.pow(u32::from(resolution.min(38)) - 12))
        };
        Self { unit, offset_ps: u128::from(offset_s) * 1_000_000_000_000 }
    }

    fn ps(&self, ticks: u128) -> Option<u128> {
        (ticks.checked_mul(self.unit.0)? / self.unit.1).checked_add(self.offset_ps)
    }
}

impl TraceReader {
    pub fn open(spec: &TraceSpec) -> Result<Self, InputError> {
        let file = spec.path.display().to_string();
        let error = |problem: String| InputError::whole_file(&file, problem);
        let mut handle = File::open(&spec.path).map_err(|err| error(format!("cannot open: {err}")))?;
        let mut magic = [0u8; 4];
        let is_pcapng = handle.read_exact(&mut magic).is_ok() && magic == PCAPNG_MAGIC;
        handle.rewind().map_err(|err| error(format!("cannot read: {err}")))?;
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        // Unbuffered here: the readers keep a buffer of their own (8 MB reads), and a second
        // one would copy every byte once more.
        let buffered = Counted { file: Box::new(handle), read: read.clone() };
        let format = if is_pcapng {
            let reader = PcapNgReader::new(buffered).map_err(|err| {
                InputError::new(&file, "section header", format!("not a pcapng file: {}", first_line(err)))
            })?;
            Format::PcapNg(Box::new(PcapNgState {
                reader,
                interface: spec.interface.clone(),
                direction: spec.direction,
                last_ps: 0,
                found_interface: false,
            }))
        } else {
            if spec.interface.is_some() || spec.direction.is_some() {
                return Err(error("if= and dir= choose frames of a pcapng file; this is a pcap file".into()));
            }
            Format::Pcap(Box::new(
                PcapRecords::open(buffered).map_err(|(field, problem)| InputError::new(&file, field, problem))?,
            ))
        };
        // pcapng blocks count from the section header (block 0), which opening read.
        let position = usize::from(matches!(format, Format::PcapNg(_)));
        Ok(Self { file, format, position, read })
    }

    /// Bytes read from the file so far (a buffer ahead of the frames returned).
    pub fn bytes_read(&self) -> u64 {
        self.read.get()
    }

    /// The next frame, `None` at the end of the file.
    pub fn next_frame(&mut self) -> Option<Result<CapturedFrame, InputError>> {
        match &mut self.format {
            Format::Pcap(records) => {
                let record = self.position;
                match records.next_record() {
                    Ok(None) => None,
                    Ok(Some(frame)) => {
                        self.position += 1;
                        Some(Ok(frame))
                    }
                    Err(problem) => Some(Err(InputError::new(&self.file, format!("record {record}"), problem))),
                }
            }
            Format::PcapNg(state) => loop {
                let block_index = self.position;
                let Some(block) = state.reader.next_block() else {
                    // At the end: an interface chosen by index or name that no packet had.
                    return match state.interface.take() {
                        Some(choice) if !state.found_interface => Some(Err(InputError::whole_file(
                            &self.file,
                            format!("no interface {choice} ({} interfaces)", state.reader.interfaces().len()),
                        ))),
                        _ => None,
                    };
                };
                self.position += 1;
                let error = |problem: String| InputError::new(&self.file, format!("block {block_index}"), problem);
                let block = match block {
                    // Owned, so that the interface table can be read with it (the frame's
                    // bytes are copied once either way).
                    Ok(block) => block.into_owned(),
                    Err(err) => return Some(Err(error(first_line(err)))),
                };
                match state.frame(block) {
                    Ok(Some(frame)) => return Some(Ok(frame)),
                    Ok(None) => continue,
                    Err(problem) => return Some(Err(error(problem))),
                }
            },
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<CapturedFrame, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_frame()
    }
}

/// A record must hold its whole frame.
fn whole(captured: usize, original: usize) -> Result<(), String> {
    if captured < original {
        return Err(format!(
            "holds {captured} of the frame's {original} bytes (captured with a snap length): replay needs whole frames"
        ));
    }
    Ok(())
}

/// The largest record a pcap may hold (a frame of 256 KiB; Ethernet's jumbo frames are 9 KB):
/// a corrupt length beyond it is an error, not an allocation of gigabytes.
pub(super) const MAX_RECORD: usize = 1 << 18;

/// The read buffer of a pcap: large reads, and room for the largest record.
pub(super) const READ_BUFFER: usize = 1 << 20;

/// Classic pcap records, parsed from large reads of the file (pcap-file's reader copied each
/// frame through two buffers and a borrowed packet: reading was 12% of a 64 B replay; this
/// way it is one copy into the frame's own bytes).
struct PcapRecords {
    file: Counted,
    buffer: Box<[u8]>,
    /// The unparsed bytes are `buffer[start..end]`.
    start: usize,
    end: usize,
    big_endian: bool,
    /// Picoseconds per unit of the timestamp's fraction (micro- or nanoseconds), and the
    /// fraction's bound.
    fraction_ps: u128,
    fraction_limit: u32,
    snap_len: u32,
}

impl PcapRecords {
    /// Reads the file header (`Err` holds the field and the problem).
    fn open(file: Counted) -> Result<Self, (&'static str, String)> {
        let mut records = Self {
            file,
            buffer: vec![0; READ_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            big_endian: false,
            fraction_ps: 0,
            fraction_limit: 0,
            snap_len: 0,
        };
        let available = records.fill(24).map_err(|err| ("header", format!("cannot read: {err}")))?;
        let (_, header) = PcapHeader::from_slice(&records.buffer[..available])
            .map_err(|err| ("header", format!("not a pcap or pcapng file: {}", first_line(err))))?;
        if header.datalink != DataLink::ETHERNET {
            return Err(("header.linktype", format!("{:?} is not Ethernet", header.datalink)));
        }
        records.start = 24;
        records.big_endian = header.endianness == pcap_file::Endianness::Big;
        (records.fraction_ps, records.fraction_limit) = match header.ts_resolution {
            TsResolution::MicroSecond => (1_000_000, 1_000_000),
            TsResolution::NanoSecond => (1_000, 1_000_000_000),
        };
        records.snap_len = header.snaplen;
        Ok(records)
    }

    /// Makes `wanted` bytes available from `start`, reading more; fewer only at the end of
    /// the file. Returns how many are available.
    #[inline]
    fn fill(&mut self, wanted: usize) -> std::io::Result<usize> {
        if self.end - self.start < wanted {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            while self.end < wanted {
                match self.file.read(&mut self.buffer[self.end..]) {
                    Ok(0) => break,
                    Ok(read) => self.end += read,
                    Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(self.end - self.start)
    }

    #[inline]
    fn field(&self, at: usize) -> u32 {
        let raw = [self.buffer[at], self.buffer[at + 1], self.buffer[at + 2], self.buffer[at + 3]];
        if self.big_endian {
            u32::from_be_bytes(raw)
        } else {
            u32::from_le_bytes(raw)
        }
    }

    /// The next record's frame, `None` at the end of the file.
    fn next_record(&mut self) -> Result<Option<CapturedFrame>, String> {
        let read_error = |err: std::io::Error| format!("cannot read: {err}");
        match self.fill(16).map_err(read_error)? {
            0 => return Ok(None),
            1..16 => return Err("the file ends inside the record's header".into()),
            _ => {}
        }
        let seconds = self.field(self.start);
        let fraction = self.field(self.start + 4);
        let captured = self.field(self.start + 8);
        let original = self.field(self.start + 12);
        if fraction >= self.fraction_limit {
            return Err(format!("timestamp fraction {fraction} is not under {}", self.fraction_limit));
        }
        if captured > original {
            return Err(format!("holds {captured} bytes, more than the frame's {original}"));
        }
        whole(captured as usize, original as usize)?;
        if captured > self.snap_len || captured as usize > MAX_RECORD {
            return Err(format!(
                "holds {captured} bytes, more than the file's snap length {} or {MAX_RECORD}",
                self.snap_len
            ));
        }
        let length = captured as usize;
        self.start += 16;
        let available = self.fill(length).map_err(read_error)?;
        if available < length {
            return Err(format!("the file ends inside the record ({available} of its {length} bytes)"));
        }
        let bytes = self.buffer[self.start..self.start + length].to_vec();
        self.start += length;
        let time_ps = u128::from(seconds) * PS_PER_S + u128::from(fraction) * self.fraction_ps;
        Ok(Some(CapturedFrame { time_ps, bytes }))
    }
}

impl PcapNgState {
    /// The frame a block holds for this spec, if any.
    fn frame(&mut self, block: Block<'static>) -> Result<Option<CapturedFrame>, String> {
        let (interface_id, ticks, flags, original, data) = match block {
            Block::EnhancedPacket(packet) => {
                let flags = packet.options.iter().find_map(|option| match option {
                    EnhancedPacketOption::Flags(flags) => Some(*flags),
                    _ => None,
                });
                // pcap-file reads the 64-bit timestamp as nanoseconds: as_nanos gives back the
                // raw count, which the interface's if_tsresol scales.
                let ticks = Some(packet.timestamp.as_nanos());
                (packet.interface_id, ticks, flags, packet.original_len as usize, packet.data)
            }
            Block::SimplePacket(packet) => (0, None, None, packet.original_len as usize, packet.data),
            Block::InterfaceDescription(interface) => {
                // The parser has just added it to the section's interfaces.
                let index = self.reader.interfaces().len().saturating_sub(1) as u32;
                self.found_interface |= self.interface.as_ref().is_none_or(|choice| choice.names(index, &interface));
                return Ok(None);
            }
            _ => return Ok(None),
        };
        // Interface descriptions come before the packets that name them (per section).
        let interfaces = self.reader.interfaces();
        let interface = interfaces
            .get(interface_id as usize)
            .ok_or_else(|| format!("a packet of interface {interface_id}, which no interface description declares"))?;
        let wanted = match &self.interface {
            Some(choice) => choice.names(interface_id, interface),
            None if interfaces.len() > 1 => {
                return Err(format!("the file has {} interfaces: choose one with :if=N or :if=NAME", interfaces.len()))
            }
            None => true,
        };
        if !wanted {
            return Ok(None);
        }
        if interface.linktype != DataLink::ETHERNET {
            return Err(format!("interface {interface_id} is {:?}, not Ethernet", interface.linktype));
        }
        match (self.direction, flags.map(|flags| flags & 0b11)) {
            (None, _) | (Some(Direction::In), Some(1)) | (Some(Direction::Out), Some(2)) => {}
            (Some(_), Some(1 | 2)) => return Ok(None),
            (Some(_), _) => return Err("dir= was given, but this packet has no direction flag".into()),
        }
        whole(data.len(), original)?;
        let time_ps = match ticks {
            Some(ticks) => Clock::of(interface).ps(ticks).ok_or("timestamp out of range")?,
            None => self.last_ps,
        };
        self.last_ps = time_ps;
        Ok(Some(CapturedFrame { time_ps, bytes: data.into_owned() }))
    }
}

/// The replay's origin for these inputs: the whole second in which the earliest of their first
/// frames falls (0 for traces that start in their first second, as generated ones do), so
/// that real captures, stamped in Unix time, fit picoseconds in a u64 and keep their
/// sub-second times. Opens each input and returns its reader with the first frame read.
pub fn open_traces(specs: &[&TraceSpec]) -> Result<(u128, Vec<TraceSource>), InputError> {
    let mut sources = Vec::with_capacity(specs.len());
    for spec in specs {
        let mut reader = TraceReader::open(spec)?;
        let first = reader.next().transpose()?;
        sources.push((reader, first, spec.to_string()));
    }
    let first = sources.iter().filter_map(|(_, first, _)| first.as_ref()).map(|frame| frame.time_ps).min().unwrap_or(0);
    let origin_ps = first / PS_PER_S * PS_PER_S;
    if origin_ps / 1000 > u128::from(u64::MAX) {
        return Err(InputError::whole_file(specs[0], "timestamps beyond the year 2554"));
    }
    let sources =
        sources.into_iter().map(|(reader, first, file)| TraceSource::new(reader, first, origin_ps, file)).collect();
    Ok((origin_ps, sources))
}

/// A trace read as it is needed, frame by frame, timed from the replay's origin.
pub struct TraceSource {
    reader: TraceReader,
    /// The next frame, read ahead, and its time from the origin (`None`: too late for a u64).
    peeked: Option<(Option<u64>, Vec<u8>)>,
    origin_ps: u128,
    file: String,
    /// Frames taken so far.
    read: usize,
}

impl TraceSource {
    fn new(reader: TraceReader, first: Option<CapturedFrame>, origin_ps: u128, file: String) -> Self {
        let mut source = Self { reader, peeked: None, origin_ps, file, read: 0 };
        source.peeked = first.map(|frame| source.timed(frame));
        source
    }

    /// A frame's time from the origin. A frame stamped before the origin (a capture whose
    /// timestamps step back before every input's first frame) is offered at the origin.
    fn timed(&self, frame: CapturedFrame) -> (Option<u64>, Vec<u8>) {
        (u64::try_from(frame.time_ps.saturating_sub(self.origin_ps)).ok(), frame.bytes)
    }

    /// Bytes read from the file so far.
    pub fn bytes_read(&self) -> u64 {
        self.reader.bytes_read()
    }

    /// The next frame's time from the origin, without taking it.
    #[inline]
    pub fn peek_time(&self) -> Option<u64> {
        self.peeked.as_ref().map(|(time_ps, _)| time_ps.unwrap_or(u64::MAX))
    }

    /// Takes the next frame.
    pub fn take(&mut self) -> Result<Option<TraceFrame>, InputError> {
        let Some((time_ps, bytes)) = self.peeked.take() else { return Ok(None) };
        let time_ps = time_ps.ok_or_else(|| {
            InputError::new(&self.file, format!("frame {}", self.read), "more than 213 days after the first frame")
        })?;
        self.read += 1;
        self.peeked = match self.reader.next_frame() {
            Some(frame) => Some(self.timed(frame?)),
            None => None,
        };
        Ok(Some(TraceFrame { time_ps, bytes }))
    }
}

impl Iterator for TraceSource {
    type Item = Result<TraceFrame, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.take().transpose()
    }
}

/// Reads whole traces, timed from their origin (`open_traces`); returns the origin in
/// nanoseconds (output captures add it back) and each trace.
pub fn read_traces(specs: &[&TraceSpec]) -> Result<(u64, Vec<Vec<TraceFrame>>), InputError> {
    let (origin_ps, sources) = open_traces(specs)?;
    let traces = sources.into_iter().map(Iterator::collect).collect::<Result<_, _>>()?;
    Ok(((origin_ps / 1000) as u64, traces))
}

/// Reads one whole trace (timed as `read_traces` does).
pub fn read_trace(spec: &TraceSpec) -> Result<Vec<TraceFrame>, InputError> {
    let (_, mut traces) = read_traces(&[spec])?;
    Ok(traces.pop().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::{PcapPacket, PcapWriter};
    use std::path::Path;
    use std::time::Duration;

    /// A little-endian microsecond pcap (snap length 1,500) of the given 16-byte record headers
    /// (seconds, fraction, captured, original), each followed by `captured` bytes, cut to
    /// `length` bytes if given.
    fn pcap_of(path: &Path, records: &[[u32; 4]], length: Option<usize>) {
        pcap_with_snap_length(path, 1500, records, length);
    }

    fn pcap_with_snap_length(path: &Path, snap_length: u32, records: &[[u32; 4]], length: Option<usize>) {
        let mut bytes = Vec::new();
        for field in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, snap_length, 1] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        for record in records {
            record.iter().for_each(|field| bytes.extend_from_slice(&field.to_le_bytes()));
            bytes.extend((0..record[2]).map(|index| index as u8));
        }
        bytes.truncate(length.unwrap_or(bytes.len()));
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn pcap_records_are_read_or_refused_naming_the_record() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("records.pcap");
        let good = [3, 999_999, 60, 60];
        pcap_of(&path, &[good, [4, 0, 1500, 1500]], None);
        let read = frames(&TraceSpec::file(&path)).unwrap();
        assert_eq!(read[0], (3_999_999_000_000, (0..60).collect::<Vec<u8>>()));
        assert_eq!((read[1].0, read[1].1.len()), (4_000_000_000_000, 1500));

        type Case<'a> = (&'a [[u32; 4]], Option<usize>, &'a str);
        let cases: [Case; 6] = [
            (&[good, [0, 1_000_000, 60, 60]], None, "fraction 1000000 is not under 1000000"),
            (&[good, [0, 0, 61, 60]], None, "holds 61 bytes, more than the frame's 60"),
            (&[good, [0, 0, 1501, 1501]], None, "more than the file's snap length 1500"),
            (&[good, [0, 0, 60, 70]], None, "holds 60 of the frame's 70 bytes"),
            (&[good, good], Some(24 + 76 + 9), "ends inside the record's header"),
            (&[good, good], Some(24 + 76 + 16 + 59), "ends inside the record (59 of its 60 bytes)"),
        ];
        for (records, length, problem) in cases {
            pcap_of(&path, records, length);
            let err = frames(&TraceSpec::file(&path)).unwrap_err();
            assert_eq!(err.field, "record 1", "{problem}");
            assert!(err.problem.contains(problem), "{} (expected {problem})", err.problem);
            assert!(!err.to_string().contains('\n'));
        }
        // Whatever the snap length says, a record longer than any frame is refused.
        let largest = MAX_RECORD as u32;
        pcap_with_snap_length(&path, u32::MAX, &[good, [0, 0, largest, largest]], None);
        assert_eq!(frames(&TraceSpec::file(&path)).unwrap()[1].1.len(), MAX_RECORD);
        pcap_with_snap_length(&path, u32::MAX, &[good, [0, 0, largest + 1, largest + 1]], None);
        let err = frames(&TraceSpec::file(&path)).unwrap_err();
        assert!(err.problem.contains("or 262144"), "{}", err.problem);
        // A file that ends after its header has no frames; one shorter is not a pcap.
        pcap_of(&path, &[], None);
        assert_eq!(frames(&TraceSpec::file(&path)).unwrap(), vec![]);
        pcap_of(&path, &[], Some(20));
        assert_eq!(frames(&TraceSpec::file(&path)).unwrap_err().field, "header");
    }

    #[test]
    fn records_across_the_read_buffer_s_end_read_whole() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("long.pcap");
        let mut writer = CaptureWriter::create(&path, 0).unwrap();
        // 3 MB of frames of every length from 60 to 1,500 bytes: records straddle the end of
        // the 1 MiB read buffer at many offsets.
        let lengths: Vec<usize> = (0..4000).map(|index| 60 + index * 7 % 1441).collect();
        for (index, &length) in lengths.iter().enumerate() {
            writer.write(index as u64 * 1000, &vec![index as u8; length]).unwrap();
        }
        writer.finish().unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 2 * READ_BUFFER as u64);
        let read = frames(&TraceSpec::file(&path)).unwrap();
        assert_eq!(read.len(), lengths.len());
        for (index, ((time_ps, bytes), length)) in read.iter().zip(&lengths).enumerate() {
            assert_eq!((*time_ps, bytes.len()), (index as u64 * 1000, *length), "record {index}");
            assert!(bytes.iter().all(|&byte| byte == index as u8), "record {index}");
        }
    }

    /// A reader that returns at most a few bytes at a time and is interrupted (EINTR) before
    /// every other read, as a pipe or a slow device may be.
    struct Choppy {
        inner: File,
        reads: usize,
    }

    impl Read for Choppy {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            if self.reads.is_multiple_of(2) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let most = 1 + self.reads % 13;
            let room = buffer.len().min(most);
            self.inner.read(&mut buffer[..room])
        }
    }

    #[test]
    fn records_read_whole_through_short_and_interrupted_reads() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("choppy.pcap");
        let mut writer = CaptureWriter::create(&path, 0).unwrap();
        for index in 0..300u64 {
            writer.write(index * 1000, &vec![index as u8; 60 + index as usize % 50]).unwrap();
        }
        writer.finish().unwrap();
        let whole = frames(&TraceSpec::file(&path)).unwrap();
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let choppy = Choppy { inner: File::open(&path).unwrap(), reads: 0 };
        let mut records = PcapRecords::open(Counted { file: Box::new(choppy), read: read.clone() }).unwrap();
        let mut chopped = Vec::new();
        while let Some(frame) = records.next_record().unwrap() {
            chopped.push((frame.time_ps as u64, frame.bytes));
        }
        assert_eq!(chopped, whole);
        assert_eq!(read.get(), std::fs::metadata(&path).unwrap().len());
    }

    #[test]
    fn pcap_output_is_what_other_readers_read() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("out.pcap");
        let mut writer = CaptureWriter::create(&path, 7_000_000_000).unwrap();
        writer.write(1_500_000, &[0x5a; 64]).unwrap();
        writer.write(2_000_000_000_000, &[1, 2, 3]).unwrap();
        writer.finish().unwrap();
        let mut reader = pcap_file::pcap::PcapReader::new(File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.header().ts_resolution, TsResolution::NanoSecond);
        let first = reader.next_packet().unwrap().unwrap();
        assert_eq!((first.timestamp, first.orig_len, &first.data[..]), (Duration::new(7, 1_500), 64, &[0x5a; 64][..]));
        let second = reader.next_packet().unwrap().unwrap();
        assert_eq!((second.timestamp, second.orig_len, &second.data[..]), (Duration::new(9, 0), 3, &[1, 2, 3][..]));
        assert!(reader.next_packet().is_none());
        // Past 2106 a pcap cannot say the second: an error, not a wrapped time.
        let mut writer = CaptureWriter::create(&path, u64::from(u32::MAX) * 1_000_000_000).unwrap();
        assert!(writer.write(1_000_000_000_000, &[0; 60]).unwrap_err().problem.contains("2106"));
    }

    #[test]
    fn round_trip_keeps_nanoseconds() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let path = dir.join("t.pcap");
        let mut writer = CaptureWriter::create(&path, 0).unwrap();
        writer.write(1_234_567_000, &[1, 2, 3]).unwrap();
        writer.write(1_234_568_000, &[4; 60]).unwrap();
        writer.finish().unwrap();
        let frames = read_trace(&TraceSpec::file(&path)).unwrap();
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
        let err = read_trace(&TraceSpec::file(&path)).err().unwrap();
        assert_eq!(err.field, "header");
        assert!(!err.to_string().contains('\n'));

        let good = dir.join("good.pcap");
        let mut writer = CaptureWriter::create(&good, 0).unwrap();
        writer.write(0, &[7; 60]).unwrap();
        writer.write(1000, &[7; 60]).unwrap();
        writer.finish().unwrap();
        let mut bytes = std::fs::read(&good).unwrap();
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&path, &bytes).unwrap();
        let err = read_trace(&TraceSpec::file(&path)).err().unwrap();
        assert_eq!(err.field, "record 1", "{err}");

        assert_eq!(read_trace(&TraceSpec::file(dir.join("missing.pcap"))).err().unwrap().field, "");
    }

    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
    use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::Endianness;
    use std::borrow::Cow;

    /// Frames with their absolute times (u64 is enough for these tests' files).
    fn frames(spec: &TraceSpec) -> Result<Vec<(u64, Vec<u8>)>, InputError> {
        TraceReader::open(spec)?.map(|frame| frame.map(|frame| (frame.time_ps as u64, frame.bytes))).collect()
    }

    #[test]
    fn pcaps_in_micro_and_nanoseconds_and_both_byte_orders_read_alike() {
        let scratch = tempfile::tempdir().unwrap();
        for (resolution, endianness) in [
            (TsResolution::MicroSecond, Endianness::Little),
            (TsResolution::MicroSecond, Endianness::Big),
            (TsResolution::NanoSecond, Endianness::Little),
            (TsResolution::NanoSecond, Endianness::Big),
        ] {
            let path = scratch.path().join(format!("{resolution:?}-{endianness:?}.pcap"));
            let header = PcapHeader {
                datalink: DataLink::ETHERNET,
                ts_resolution: resolution,
                endianness,
                ..PcapHeader::default()
            };
            let mut writer = PcapWriter::with_header(File::create(&path).unwrap(), header).unwrap();
            writer.write_packet(&PcapPacket::new(Duration::from_micros(1_500_001), 60, &[0xab; 60])).unwrap();
            writer.write_packet(&PcapPacket::new(Duration::from_micros(1_500_003), 3, &[1, 2, 3])).unwrap();
            drop(writer);
            let read = frames(&TraceSpec::file(&path)).unwrap();
            assert_eq!(read, vec![(1_500_001_000_000, vec![0xab; 60]), (1_500_003_000_000, vec![1, 2, 3])], "{path:?}");
        }
    }

    /// Two interfaces: "host0" at the default microsecond resolution with a 10 s offset,
    /// "up0" in nanoseconds; direction flags as `run --capture` writes them.
    fn two_interface_pcapng(path: &Path, endianness: Endianness, truncate_last: bool) {
        let section = SectionHeaderBlock { endianness, ..SectionHeaderBlock::default() };
        let mut writer = PcapNgWriter::with_section_header(File::create(path).unwrap(), section).unwrap();
        let interface =
            |name: &'static str, options: Vec<InterfaceDescriptionOption<'static>>| InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: 0,
                options: [vec![InterfaceDescriptionOption::IfName(Cow::Borrowed(name))], options].concat(),
            };
        writer.write_pcapng_block(interface("host0", vec![InterfaceDescriptionOption::IfTsOffset(10)])).unwrap();
        writer.write_pcapng_block(interface("up0", vec![InterfaceDescriptionOption::IfTsResol(9)])).unwrap();
        let packet = |interface_id: u32, ticks: u64, flags: u32, byte: u8, original_len: u32| EnhancedPacketBlock {
            interface_id,
            timestamp: Duration::from_nanos(ticks),
            original_len,
            data: Cow::Owned(vec![byte; 60]),
            options: vec![EnhancedPacketOption::Flags(flags)],
        };
        writer.write_pcapng_block(packet(0, 7, 1, 0xa0, 60)).unwrap(); // host0 in, 7 us
        writer.write_pcapng_block(packet(1, 8_000, 2, 0xb0, 60)).unwrap(); // up0 out, 8 us
        writer.write_pcapng_block(packet(0, 9, 2, 0xa1, 60)).unwrap(); // host0 out, 9 us
        writer.write_pcapng_block(SimplePacketBlock { original_len: 60, data: Cow::Owned(vec![0xa2; 60]) }).unwrap();
        writer.write_pcapng_block(packet(1, 12_000, 1, 0xb1, if truncate_last { 1500 } else { 60 })).unwrap();
    }

    #[test]
    fn pcapng_picks_an_interface_and_a_direction_at_its_resolution() {
        let scratch = tempfile::tempdir().unwrap();
        for endianness in [Endianness::Little, Endianness::Big] {
            let path = scratch.path().join(format!("two-{endianness:?}.pcapng"));
            two_interface_pcapng(&path, endianness, false);
            let spec = |text: &str| TraceSpec::parse("--in", &format!("{}{text}", path.display())).unwrap();
            let bytes =
                |read: Vec<(u64, Vec<u8>)>| read.iter().map(|(time, frame)| (*time, frame[0])).collect::<Vec<_>>();
            let ten_s = 10_000_000_000_000;
            // host0: microseconds plus a 10 s offset; the simple packet takes the time before it.
            assert_eq!(
                bytes(frames(&spec(":if=0")).unwrap()),
                vec![(ten_s + 7_000_000, 0xa0), (ten_s + 9_000_000, 0xa1), (ten_s + 9_000_000, 0xa2)]
            );
            assert_eq!(bytes(frames(&spec(":if=up0:dir=in")).unwrap()), vec![(12_000_000, 0xb1)]);
            // up0: nanoseconds, by name or index.
            assert_eq!(bytes(frames(&spec(":if=up0")).unwrap()), vec![(8_000_000, 0xb0), (12_000_000, 0xb1)]);
            assert_eq!(bytes(frames(&spec(":dir=out:if=1")).unwrap()), vec![(8_000_000, 0xb0)]);
            // A choice is required with two interfaces, and must exist.
            let field_and_problem = |text: &str| {
                let err = frames(&spec(text)).unwrap_err();
                assert!(!err.to_string().contains('\n'));
                (err.field, err.problem)
            };
            let (field, problem) = field_and_problem("");
            assert_eq!(field, "block 3", "the first packet, after the section and two interfaces");
            assert!(problem.contains("2 interfaces: choose one"), "{problem}");
            assert!(field_and_problem(":if=5").1.contains("no interface 5"));
            assert!(field_and_problem(":if=spine").1.contains("no interface 'spine'"));
            // The simple packet has no direction to filter on.
            let (field, problem) = field_and_problem(":if=0:dir=out");
            assert_eq!(field, "block 6");
            assert!(problem.contains("no direction flag"), "{problem}");
        }
    }

    #[test]
    fn truncated_records_are_an_error_naming_the_record() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("cut.pcapng");
        two_interface_pcapng(&path, Endianness::Little, true);
        let err = frames(&TraceSpec::parse("--in", &format!("{}:if=1", path.display())).unwrap()).unwrap_err();
        assert_eq!(err.field, "block 7");
        assert!(err.problem.contains("holds 60 of the frame's 1500 bytes"), "{}", err.problem);

        let path = scratch.path().join("cut.pcap");
        let mut writer = PcapWriter::new(File::create(&path).unwrap()).unwrap();
        writer.write_packet(&PcapPacket::new(Duration::ZERO, 60, &[0; 60])).unwrap();
        writer.write_packet(&PcapPacket::new(Duration::ZERO, 1500, &[0; 96])).unwrap();
        drop(writer);
        let err = frames(&TraceSpec::file(&path)).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.problem.contains("holds 96 of the frame's 1500 bytes")),
            ("record 1", true)
        );
    }

    #[test]
    fn trace_specs_peel_selectors_from_the_end() {
        let parse = |text: &str| TraceSpec::parse("--in", text);
        assert_eq!(parse("a.pcap").unwrap(), TraceSpec::file("a.pcap"));
        assert_eq!(
            parse("dir:x/cap.pcapng:if=2:dir=in").unwrap(),
            TraceSpec {
                path: "dir:x/cap.pcapng".into(),
                interface: Some(InterfaceChoice::Index(2)),
                direction: Some(Direction::In)
            }
        );
        assert_eq!(parse("c.pcapng:dir=out:if=up0").unwrap().interface, Some(InterfaceChoice::Name("up0".into())));
        // Not a selector: part of the path.
        assert_eq!(parse("c:x=1").unwrap(), TraceSpec::file("c:x=1"));
        for bad in [":if=1", "c.pcapng:dir=sideways", "c.pcapng:if=1:if=2", "c.pcapng:if="] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.file, "--in", "{bad}: {err}");
        }
        // A pcap file has no interfaces or directions to choose.
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("p.pcap");
        PcapWriter::new(File::create(&path).unwrap()).unwrap();
        let err = frames(&parse(&format!("{}:dir=in", path.display())).unwrap()).unwrap_err();
        assert!(err.problem.contains("this is a pcap file"), "{err}");
    }

    /// Real captures are stamped in Unix time (1.7e21 ps, more than a u64): traces are timed
    /// from the whole second of the earliest first frame, and outputs add it back.
    #[test]
    fn unix_time_captures_are_timed_from_the_second_of_their_first_frame() {
        let scratch = tempfile::tempdir().unwrap();
        let write = |name: &str, times_ns: &[u64]| {
            let path = scratch.path().join(name);
            let header = PcapHeader { ts_resolution: TsResolution::NanoSecond, ..PcapHeader::default() };
            let mut writer = PcapWriter::with_header(File::create(&path).unwrap(), header).unwrap();
            for &ns in times_ns {
                writer.write_packet(&PcapPacket::new(Duration::from_nanos(ns), 60, &[0; 60])).unwrap();
            }
            TraceSpec::file(path)
        };
        let second = 1_764_547_200u64 * 1_000_000_000;
        let a = write("a.pcap", &[second + 500_000_000, second + 400_000_000, second + 2_000_000_000]);
        let b = write("b.pcap", &[second + 250_000_000]);
        let (origin_ns, traces) = read_traces(&[&a, &b]).unwrap();
        assert_eq!(origin_ns, second);
        let times: Vec<Vec<u64>> = traces.iter().map(|t| t.iter().map(|f| f.time_ps).collect()).collect();
        assert_eq!(times, vec![vec![500_000_000_000, 400_000_000_000, 2_000_000_000_000], vec![250_000_000_000]]);
        // Outputs share the inputs' clock.
        let out = scratch.path().join("out.pcap");
        let mut writer = CaptureWriter::create(&out, origin_ns).unwrap();
        writer.write(250_000_000_000, &[0; 60]).unwrap();
        writer.finish().unwrap();
        let written = TraceReader::open(&TraceSpec::file(&out)).unwrap().next().unwrap().unwrap();
        assert_eq!(written.time_ps, u128::from(second + 250_000_000) * 1000);
    }
}
