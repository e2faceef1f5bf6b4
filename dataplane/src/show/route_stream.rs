//! `raceway show routes`, streamed: the switch sorts the FIB's routes (those inside a prefix,
//! if one is asked) once per client token and sends them a page at a time from the cursor the
//! client gives back; the client prints each page as it comes. Neither side ever holds the
//! text of the whole table, so a million routes cost the client a page of memory.
//!
//! The switch answers `/raceway/show,TOKEN routes[:PREFIX] CURSOR` with one string,
//! `NEXT WIDTH LINES`: `NEXT` is the cursor to ask for next (`end` after the last page),
//! `WIDTH` the widest prefix of the listing (for the client's column), `LINES` the page's
//! lines, each `PREFIX TARGET` as `Fib::to_text` writes them (the first page's first line is
//! the title), joined by `|` and escaped (`escape`) so that DPDK 22.11, which writes a string
//! reply as it is, writes valid JSON.
//!
//! Invariant: the pages of one token come from one snapshot of the FIB, in order, each line
//! whole and in exactly one page; a page's string stays under DPDK's 8 KiB limit.

use super::output::write_error;
use super::serve::ByToken;
use crate::config::Prefix;
use crate::pipeline::fib::{masked, Fib, Target};
use std::io::Write;
use std::net::IpAddr;
use std::sync::Arc;

/// Escaped bytes of lines in one page: with the header, under DPDK's 8,192-byte string.
const PAGE_BYTES: usize = 8000;
/// The view's name; `routes:PREFIX` asks for the routes inside PREFIX.
pub const VIEW: &str = "routes";
/// Separates a page's lines (escaped inside them).
const LINE_SEPARATOR: u8 = b'|';

/// One client's listing: the routes it asked for, sorted, from one FIB snapshot.
struct Listing {
    fib: Arc<Fib>,
    routes: Vec<(IpAddr, u8, Target)>,
    title: String,
    width: usize,
}

/// The switch's side: listings being read, by the client's token.
#[derive(Default)]
pub struct RouteStreams {
    kept: ByToken<Listing>,
}

/// Whether `prefix` lies inside `within` (is it, or more specific, in the same family).
pub fn inside(address: IpAddr, len: u8, within: Prefix) -> bool {
    address.is_ipv4() == within.address.is_ipv4() && len >= within.len && masked(address, within.len) == within.address
}

impl RouteStreams {
    /// The reply to `TOKEN VIEW CURSOR` for a `routes` view, or `None` if `params` is not one;
    /// `fib` gives the snapshot to list when a listing starts (cursor 0, or an unknown token).
    pub fn answer(&self, params: &str, fib: impl FnOnce() -> Arc<Fib>, port_names: &[&str]) -> Option<String> {
        let mut words = params.split_whitespace();
        let (token, view, cursor) = (words.next()?, words.next()?, words.next()?.parse::<usize>().ok()?);
        let within = match view.strip_prefix(VIEW)? {
            "" => None,
            rest => Some(Prefix::parse(rest.strip_prefix(':')?).ok()?),
        };
        let listing = match self.kept.get(token) {
            Some(listing) if cursor > 0 => listing,
            _ => {
                let listing = Arc::new(Listing::new(fib(), within));
                self.kept.keep(token, Arc::clone(&listing));
                listing
            }
        };
        let (page, last) = listing.page(cursor, port_names);
        if last {
            // Read to its end: the listing, and the FIB snapshot it holds, go now rather than
            // when later clients push them out.
            self.kept.forget(token);
        }
        Some(page)
    }
}

impl Listing {
    fn new(fib: Arc<Fib>, within: Option<Prefix>) -> Self {
        let mut routes = fib.dump();
        if let Some(within) = within {
            routes.retain(|&(address, len, _)| inside(address, len, within));
        }
        let mut title = format!(
            "raceway FIB generation {}: {} routes, {} neighbours",
            fib.generation,
            fib.routes(),
            fib.neighbors()
        );
        if let Some(within) = within {
            title.push_str(&format!("; {} inside {within}", routes.len()));
        }
        let width = routes.iter().map(|&(address, len, _)| prefix_width(address, len)).max().unwrap_or(0);
        Self { fib, routes, title, width }
    }

    /// The page from `cursor`: as many whole lines as fit (at least one, cut if it alone
    /// does not), and the cursor after them; true if it is the last.
    fn page(&self, cursor: usize, port_names: &[&str]) -> (String, bool) {
        let mut escaped = Vec::with_capacity(PAGE_BYTES);
        if cursor == 0 {
            escape(self.title.as_bytes(), &mut escaped);
        }
        let mut line = String::new();
        let mut next = cursor;
        while let Some(&(address, len, target)) = self.routes.get(next) {
            line.clear();
            self.fib.write_route(&mut line, address, len, target, port_names);
            let start = escaped.len();
            if start > 0 {
                escaped.push(LINE_SEPARATOR);
            }
            escape(line.trim_end().as_bytes(), &mut escaped);
            if escaped.len() > PAGE_BYTES {
                if next > cursor {
                    escaped.truncate(start);
                    break;
                }
                // One line longer than a page (a group of hundreds of members): cut, never
                // in the middle of an escape.
                let mut end = PAGE_BYTES;
                while escaped[end - 2..end].contains(&b'%') {
                    end -= 1;
                }
                escaped.truncate(end);
            }
            next += 1;
        }
        let last = next >= self.routes.len();
        let next = if last { "end".to_string() } else { next.to_string() };
        let mut reply = format!("{next} {} ", self.width);
        reply.push_str(std::str::from_utf8(&escaped).expect("escaped text is ASCII"));
        (reply, last)
    }
}

/// How many characters `address/len` takes, written on the stack.
fn prefix_width(address: IpAddr, len: u8) -> usize {
    let mut buffer = [0u8; 48];
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    let _ = write!(cursor, "{address}/{len}");
    cursor.position() as usize
}

/// Appends `bytes` to `out`, each byte that JSON would need escaped, or that is `%` or the line
/// separator, or not printable ASCII, as `%XX`.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &byte in bytes {
        if byte == b'"' || byte == b'\\' || byte == b'%' || byte == LINE_SEPARATOR || !(0x20..0x7f).contains(&byte) {
            let _ = write!(out, "%{byte:02x}");
        } else {
            out.push(byte);
        }
    }
}

/// `escape` undone; `None` for a broken escape.
fn unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The client's side: asks for pages with `fetch` (a command in, the reply string out) and
/// writes each route to `out` as it comes, as a table (`Prefix`, `Resolves to`) or, with
/// `as_json`, as `{"routes": [{"prefix": ..., "resolves_to": ...}, ...]}`.
pub fn stream(
    token: &str,
    within: Option<Prefix>,
    as_json: bool,
    mut fetch: impl FnMut(&str) -> Result<String, String>,
    out: &mut impl Write,
) -> Result<(), String> {
    let view = match within {
        Some(prefix) => format!("{VIEW}:{prefix}"),
        None => VIEW.to_string(),
    };
    let written = |result: std::io::Result<()>| result.map_err(write_error);
    let mut cursor = 0;
    let mut rows = 0usize;
    loop {
        let reply = fetch(&format!("/raceway/show,{token} {view} {cursor}"))?;
        let mut parts = reply.splitn(3, ' ');
        let (next, width, lines) = match (parts.next(), parts.next(), parts.next()) {
            (Some(next), Some(width), Some(lines)) => (next, width, lines),
            _ => return Err(format!("telemetry: a malformed routes page: {reply:.80}")),
        };
        let width: usize = width.parse().map_err(|_| "telemetry: a malformed routes page width")?;
        let mut lines = lines.split(LINE_SEPARATOR as char).filter(|line| !line.is_empty());
        if cursor == 0 {
            let title = unescape(lines.next().unwrap_or("")).ok_or("telemetry: a malformed routes title")?;
            let width = width.max("Prefix".len());
            written(if as_json {
                out.write_all(b"{\n  \"routes\": [")
            } else {
                writeln!(out, "{title}\n{:<width$}  Resolves to\n{}  {}", "Prefix", "-".repeat(width), "-".repeat(11))
            })?;
        }
        for line in lines {
            let line = unescape(line).ok_or("telemetry: a malformed routes line")?;
            let (prefix, target) = line.split_once(' ').unwrap_or((&line, ""));
            written(if as_json {
                let separator = if rows == 0 { "" } else { "," };
                let object = serde_json::json!({ "prefix": prefix, "resolves_to": target });
                write!(out, "{separator}\n    {object}")
            } else {
                writeln!(out, "{prefix:<width$}  {target}", width = width.max("Prefix".len()))
            })?;
            rows += 1;
        }
        if next == "end" {
            break;
        }
        let next: usize = next.parse().map_err(|_| "telemetry: a malformed routes cursor")?;
        if next <= cursor && cursor > 0 {
            return Err("telemetry: the routes cursor went backwards".into());
        }
        cursor = next;
    }
    written(if as_json {
        out.write_all(if rows == 0 { b"]\n}\n" } else { b"\n  ]\n}\n" })
    } else if rows == 0 {
        writeln!(out, "(none)")
    } else {
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::fib::Learned;

    /// A FIB with `count` /32 routes over a group and a port, and an IPv6 route.
    fn fib(count: u32) -> Arc<Fib> {
        let mut leaf = crate::testing::Leaf::new("t")
            .port_to("p1", 100.0, "02:00:00:00:11:00", "")
            .port_to("up0", 100.0, "02:00:00:00:20:01", "")
            .port_to("up1", 100.0, "02:00:00:00:21:01", "")
            .group("g", &["up0", "up1"], "ecmp")
            .route("2001:db8:1::/64", "p1");
        for index in 0..count {
            let prefix = format!("10.{}.{}.{}/32", index >> 16, (index >> 8) & 255, index & 255);
            leaf = if index % 2 == 0 { leaf.route(&prefix, "p1") } else { leaf.group_route(&prefix, "g") };
        }
        Arc::new(Fib::new(&leaf.config(), &Learned::default(), 3))
    }

    const NAMES: [&str; 3] = ["p1", "up0", "up\"1"];

    fn listed(fib: &Arc<Fib>, within: Option<&str>, as_json: bool, pages: &mut usize) -> String {
        let streams = RouteStreams::default();
        let mut out = Vec::new();
        let fetch = |command: &str| {
            *pages += 1;
            let params = command.strip_prefix("/raceway/show,").unwrap();
            let reply = streams.answer(params, || Arc::clone(fib), &NAMES).ok_or("no answer")?;
            assert!(reply.len() < 8192, "a page of {} bytes", reply.len());
            // What DPDK would write must be JSON.
            serde_json::from_str::<serde_json::Value>(&format!("\"{reply}\"")).map_err(|err| err.to_string())?;
            Ok(reply)
        };
        stream("t1", within.map(|text| Prefix::parse(text).unwrap()), as_json, fetch, &mut out).unwrap();
        assert!(streams.kept.is_empty(), "a listing read to its end is let go");
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_route_arrives_once_in_order_over_pages() {
        let fib = fib(5000);
        let mut pages = 0;
        let text = listed(&fib, None, false, &mut pages);
        let names: Vec<&str> = NAMES.to_vec();
        let expected: Vec<String> =
            fib.to_text(&names).lines().skip(1).filter(|l| !l.starts_with("neighbor ")).map(String::from).collect();
        let mut lines = text.lines();
        assert!(lines.next().unwrap().starts_with("raceway FIB generation 3: 5001 routes"), "{text:.200}");
        let header = lines.next().unwrap();
        assert!(header.starts_with("Prefix ") && header.ends_with("  Resolves to"), "{header}");
        lines.next();
        let got: Vec<String> = lines.map(|line| line.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(got, expected);
        assert!(pages > 10, "{pages} pages");
        // A port name JSON would escape arrives as it is.
        assert!(text.contains("group ecmp up0 02:00:00:00:20:01 up\"1 02:00:00:00:21:01"));
        // The prefix column is as wide as the widest prefix.
        assert!(text.contains("\n2001:db8:1::/64  via p1"), "{text:.300}");
    }

    #[test]
    fn a_prefix_lists_what_is_inside_it_and_json_is_json() {
        let fib = fib(600);
        let mut pages = 0;
        let json: serde_json::Value =
            serde_json::from_str(&listed(&fib, Some("10.0.1.0/24"), true, &mut pages)).unwrap();
        let routes = json["routes"].as_array().unwrap();
        assert_eq!(routes.len(), 256);
        assert_eq!(routes[0], serde_json::json!({"prefix": "10.0.1.0/32", "resolves_to": "via p1 02:00:00:00:11:00"}));
        let empty: serde_json::Value =
            serde_json::from_str(&listed(&fib, Some("10.9.0.0/16"), true, &mut pages)).unwrap();
        assert_eq!(empty, serde_json::json!({"routes": []}));
        let text = listed(&fib, Some("fd00::/8"), false, &mut pages);
        assert!(text.contains("; 0 inside fd00::/8") && text.ends_with("(none)\n"), "{text}");
    }

    #[test]
    fn widths_and_escapes_hold_at_their_edges() {
        for (address, len) in
            [("1.2.3.4", 32u8), ("255.255.255.255", 0), ("::", 0), ("2001:db8::1", 128), ("fe80::1:2", 64)]
        {
            let address: IpAddr = address.parse().unwrap();
            assert_eq!(prefix_width(address, len), format!("{address}/{len}").len(), "{address}/{len}");
        }
        let mut out = Vec::new();
        escape("a|b\"c\\d%e\u{e9}".as_bytes(), &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains(['|', '"', '\\']), "{text}");
        assert_eq!(unescape(&text).unwrap(), "a|b\"c\\d%e\u{e9}");
        assert_eq!(unescape("%4"), None);
        assert_eq!(unescape("%zz"), None);
    }

    #[test]
    fn a_line_longer_than_a_page_is_cut_and_the_stream_goes_on() {
        let names: Vec<String> = (0..24).map(|index| format!("{index}{}", "p".repeat(400))).collect();
        let mut leaf = crate::testing::Leaf::new("t");
        for (index, name) in names.iter().enumerate() {
            leaf = leaf.port_to(name, 100.0, &format!("02:00:00:00:20:{index:02x}"), "");
        }
        let members: Vec<&str> = names.iter().map(String::as_str).collect();
        let leaf = leaf.group("g", &members, "ecmp").group_route("10.0.0.0/24", "g").route("10.0.1.0/24", &names[0]);
        let fib = Arc::new(Fib::new(&leaf.config(), &Learned::default(), 1));
        let streams = RouteStreams::default();
        let mut out = Vec::new();
        let fetch = |command: &str| {
            let reply = streams.answer(command.strip_prefix("/raceway/show,").unwrap(), || Arc::clone(&fib), &members);
            let reply = reply.ok_or("no answer")?;
            assert!(reply.len() < 8192, "a page of {} bytes", reply.len());
            Ok(reply)
        };
        stream("t2", None, false, fetch, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().skip(3).collect();
        assert_eq!(lines.len(), 2, "{text:.300}");
        assert!(lines[0].starts_with("10.0.0.0/24  group ecmp 0ppp") && lines[0].len() < 8000, "{:.100}", lines[0]);
        assert!(lines[1].starts_with("10.0.1.0/24  via 0ppp"), "{:.100}", lines[1]);
    }
}
