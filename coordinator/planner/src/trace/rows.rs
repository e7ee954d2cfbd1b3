//! Reading a trace CSV file's rows on every core.
//!
//! A million-feed trace is two files of ~700 MB each; one `csv::Reader` parses them at one
//! core's speed, which left most of a 16-core machine idle for the first minutes of `plan`.
//! Here the file is read in blocks, each block is cut at line ends into one piece per worker
//! thread, the pieces are parsed (field splitting, id lookup, number parsing) in parallel, and
//! the parsed rows are handed to a sequential sink in file order, so the caller's checks
//! (duplicate ids) and its error messages (file and line) are the same as a
//! sequential read's.
//!
//! Cutting at line ends is only sound while no field is quoted: a quoted field may hold a
//! line break. The first block holding a `"` hands the rest of the file to one sequential
//! `csv::Reader`, which reads it exactly like before.

use super::{line_err, TraceError};
use rayon::prelude::*;
use std::io::Read;
use std::path::Path;

/// Bytes read per block. Large enough that the parallel parse dwarfs the sequential cut and
/// sink; small enough that the block and its parsed rows stay a few tens of MB.
const BLOCK: usize = 16 << 20;

/// The selected columns of one row, in the caller's `required` order.
pub(super) type Fields<'a> = [&'a str];

fn io_err(path: &Path, source: std::io::Error) -> TraceError {
    TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Most columns a caller selects (required and optional together).
const MAX_COLUMNS: usize = 4;

/// Picks the `columns` of `rec` into `out`, or says which field is missing.
fn pick<'r>(
    path: &Path,
    line: u64,
    rec: &'r csv::StringRecord,
    columns: &[usize],
    out: &mut [&'r str; MAX_COLUMNS],
) -> Result<(), TraceError> {
    for (slot, &c) in out.iter_mut().zip(columns) {
        match rec.get(c) {
            Some(v) => *slot = v.trim(),
            None => {
                return Err(line_err(
                    path,
                    line,
                    format!("expected at least {} fields, found {}", c + 1, rec.len()),
                ))
            }
        }
    }
    Ok(())
}

/// Appends up to `block` bytes of `file` to `buf`; sets `eof` at the end of the file.
fn fill(
    file: &mut std::fs::File,
    path: &Path,
    block: usize,
    buf: &mut Vec<u8>,
    eof: &mut bool,
) -> Result<(), TraceError> {
    let have = buf.len();
    buf.resize(have + block, 0);
    let mut got = 0;
    while got < block {
        match file.read(&mut buf[have + got..]) {
            Ok(0) => {
                *eof = true;
                break;
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path, e)),
        }
    }
    buf.truncate(have + got);
    Ok(())
}

/// A line of whitespace only (`\r\n` reads as one field holding `\r`).
fn blank(rec: &csv::StringRecord) -> bool {
    rec.len() == 1 && rec[0].trim().is_empty()
}

fn reader_builder() -> csv::ReaderBuilder {
    let mut b = csv::ReaderBuilder::new();
    // Rows end at `\n` only; a CR before it is trimmed with the field's whitespace. (With
    // the default CRLF terminator the reader counts the `\n` into the next row, and its line
    // numbers lag by one per CRLF row.) Only the selected fields are trimmed, by `pick`: the
    // reader's own trimming of every field took four fifths of its time.
    b.flexible(true)
        .has_headers(false)
        .terminator(csv::Terminator::Any(b'\n'));
    b
}

/// Parses the rows of `data` (whole lines, no quotes), whose first line is file line `first`.
fn parse_piece<T>(
    path: &Path,
    data: &[u8],
    first: u64,
    columns: &[usize],
    parse: &(impl Fn(&Path, u64, &Fields) -> Result<T, TraceError> + Sync),
) -> Result<Vec<(u64, T)>, TraceError> {
    let mut rows = Vec::new();
    let mut reader = reader_builder().from_reader(data);
    let mut rec = csv::StringRecord::new();
    // Lines are counted from the bytes: the reader counts the blank lines before a row into
    // the row before. A row's position may point at those blank lines; its line is that of
    // its first byte past them.
    let (mut seen_byte, mut seen_line) = (0usize, first);
    let mut line_at = |byte: usize| {
        let mut byte = byte.min(data.len()).max(seen_byte);
        while byte < data.len() && matches!(data[byte], b'\r' | b'\n') {
            byte += 1;
        }
        seen_line += memchr::memchr_iter(b'\n', &data[seen_byte..byte]).count() as u64;
        seen_byte = byte;
        seen_line
    };
    loop {
        match reader.read_record(&mut rec) {
            Ok(false) => return Ok(rows),
            Ok(true) => {}
            Err(e) => {
                let at = e.position().map_or(data.len(), |p| p.byte() as usize);
                return Err(line_err(path, line_at(at), format!("unreadable row: {e}")));
            }
        }
        if blank(&rec) {
            continue;
        }
        let line = line_at(rec.position().map_or(0, |p| p.byte() as usize));
        let mut fields = [""; MAX_COLUMNS];
        pick(path, line, &rec, columns, &mut fields)?;
        rows.push((line, parse(path, line, &fields[..columns.len()])?));
    }
}

/// Cuts `data` (whole lines) into about `n` pieces at line ends.
fn pieces(data: &[u8], n: usize) -> Vec<&[u8]> {
    let step = data.len().div_ceil(n.max(1)).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    while start < data.len() {
        let want = (start + step).min(data.len());
        let end = if want == data.len() {
            want
        } else {
            memchr::memchr(b'\n', &data[want..]).map_or(data.len(), |i| want + i + 1)
        };
        out.push(&data[start..end]);
        start = end;
    }
    out
}

/// Reads `name` from `dir`, checks its header has the `required` columns (plus the
/// `optional` ones, appended when present), and hands each row's fields to `parse` (on any
/// thread) and the parsed value to `sink` (in file order, on the calling thread). Returns
/// whether each optional column was present.
pub(super) fn read_rows<T: Send>(
    dir: &Path,
    name: &str,
    required: &[&str],
    optional: &[&str],
    parse: impl Fn(&Path, u64, &Fields) -> Result<T, TraceError> + Sync,
    sink: impl FnMut(&Path, u64, T) -> Result<(), TraceError>,
) -> Result<Vec<bool>, TraceError> {
    read_rows_in(BLOCK, dir, name, required, optional, parse, sink)
}

fn read_rows_in<T: Send>(
    block: usize,
    dir: &Path,
    name: &str,
    required: &[&str],
    optional: &[&str],
    parse: impl Fn(&Path, u64, &Fields) -> Result<T, TraceError> + Sync,
    mut sink: impl FnMut(&Path, u64, T) -> Result<(), TraceError>,
) -> Result<Vec<bool>, TraceError> {
    let path = dir.join(name);
    let mut file = std::fs::File::open(&path).map_err(|e| io_err(&path, e))?;
    // A small file gets a small block: `fill` zeroes the block before reading into it, and
    // 16 MB per file made loading a ten-line trace cost 80 MB of memset.
    let size = file.metadata().map_or(block as u64, |m| m.len());
    let block = block.min(usize::try_from(size).unwrap_or(block).saturating_add(1));
    let mut buf: Vec<u8> = Vec::new();
    let mut eof = false;
    // The header: the first line.
    let header_end = loop {
        if let Some(i) = memchr::memchr(b'\n', &buf) {
            break i + 1;
        }
        if eof {
            break buf.len();
        }
        fill(&mut file, &path, block, &mut buf, &mut eof)?;
    };
    let headers = {
        let mut r = reader_builder().from_reader(&buf[..header_end]);
        let mut h = csv::StringRecord::new();
        match r.read_record(&mut h) {
            Ok(_) => h,
            Err(e) => {
                return Err(line_err(&path, 1, format!("unreadable header: {e}")));
            }
        }
    };
    let mut columns = Vec::new();
    for want in required {
        match headers.iter().position(|h| h.trim() == *want) {
            Some(i) => columns.push(i),
            None => {
                return Err(line_err(
                    &path,
                    1,
                    format!(
                        "missing column `{want}` (header: {})",
                        headers.iter().map(str::trim).collect::<Vec<_>>().join(",")
                    ),
                ))
            }
        }
    }
    let mut present = Vec::with_capacity(optional.len());
    for want in optional {
        let at = headers.iter().position(|h| h.trim() == *want);
        present.push(at.is_some());
        columns.extend(at);
    }
    assert!(
        columns.len() <= MAX_COLUMNS,
        "read_rows selects at most {MAX_COLUMNS} columns"
    );
    buf.drain(..header_end);
    let mut line = 2u64;
    let threads = rayon::current_num_threads();

    loop {
        if !eof && buf.len() < block {
            fill(&mut file, &path, block, &mut buf, &mut eof)?;
        }
        if buf.is_empty() {
            return Ok(present);
        }
        let cut = if eof {
            buf.len()
        } else {
            match memchr::memrchr(b'\n', &buf) {
                Some(i) => i + 1,
                // One line longer than a block: read on until it ends.
                None => {
                    let before = buf.len();
                    fill(&mut file, &path, block, &mut buf, &mut eof)?;
                    if buf.len() == before && !eof {
                        return Err(line_err(&path, line, "unreadable row".into()));
                    }
                    continue;
                }
            }
        };
        if memchr::memchr(b'"', &buf[..cut]).is_some() {
            // Quoted fields from here on: the rest of the file goes through one reader.
            let rest = std::io::Cursor::new(std::mem::take(&mut buf)).chain(file);
            return sequential(&path, rest, line, &columns, &parse, &mut sink).map(|_| present);
        }
        let parts = pieces(&buf[..cut], threads);
        let mut firsts = Vec::with_capacity(parts.len());
        for p in &parts {
            firsts.push(line);
            line += memchr::memchr_iter(b'\n', p).count() as u64;
        }
        let parsed: Vec<Result<Vec<(u64, T)>, TraceError>> = parts
            .par_iter()
            .zip(firsts.par_iter())
            .map(|(p, &first)| parse_piece(&path, p, first, &columns, &parse))
            .collect();
        for rows in parsed {
            for (l, v) in rows? {
                sink(&path, l, v)?;
            }
        }
        buf.drain(..cut);
    }
}

/// The one-reader path for the rest of a file with quoted fields; `first` is the file line
/// of the reader's first line. Its lines are the reader's count, which lags by one for each
/// blank line before a row.
fn sequential<T>(
    path: &Path,
    rest: impl Read,
    first: u64,
    columns: &[usize],
    parse: &(impl Fn(&Path, u64, &Fields) -> Result<T, TraceError> + Sync),
    sink: &mut impl FnMut(&Path, u64, T) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut reader = reader_builder().from_reader(rest);
    let mut rec = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut rec) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => {
                let at = e.position().map_or(1, |p| p.line());
                return Err(line_err(
                    path,
                    first + at - 1,
                    format!("unreadable row: {e}"),
                ));
            }
        }
        if blank(&rec) {
            continue;
        }
        let line = first + rec.position().map_or(1, |p| p.line()) - 1;
        let mut fields = [""; MAX_COLUMNS];
        pick(path, line, &rec, columns, &mut fields)?;
        let v = parse(path, line, &fields[..columns.len()])?;
        sink(path, line, v)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn rows(
        block: usize,
        dir: &Path,
        name: &str,
    ) -> Result<Vec<(u64, String, String)>, TraceError> {
        let mut out = Vec::new();
        read_rows_in(
            block,
            dir,
            name,
            &["a", "b"],
            &[],
            |_, _, f| Ok((f[0].to_string(), f[1].to_string())),
            |_, l, (a, b)| {
                out.push((l, a, b));
                Ok(())
            },
        )?;
        Ok(out)
    }

    #[test]
    fn pieces_cover_the_data_at_line_ends() {
        let data = b"1,2\n3,4\n5,6\n7,8\n9,10\n";
        for n in 1..8 {
            let p = pieces(data, n);
            assert_eq!(p.concat(), data.to_vec());
            assert!(p.iter().all(|x| x.ends_with(b"\n")), "n = {n}: {p:?}");
        }
        assert!(pieces(b"", 4).is_empty());
        assert_eq!(pieces(b"1,2\n3", 2).concat(), b"1,2\n3".to_vec());
    }

    #[test]
    fn lines_match_a_sequential_reader_across_blocks_and_quotes() {
        let dir = std::env::temp_dir().join(format!("kairos-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let check = |name: &str, want: &[(u64, String, String)], blocks: &[usize]| {
            for &block in blocks {
                let got = rows(block, &dir, name).unwrap();
                assert_eq!(got.len(), want.len(), "{name}, block {block}");
                if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                    panic!(
                        "{name}, block {block}, row {i}: {:?} vs {:?}",
                        got[i], want[i]
                    );
                }
            }
        };
        // Many blocks of CRLF rows with blank lines: the parallel path, exact lines.
        let mut text = String::from("b,a\n");
        let mut want = Vec::new();
        let mut line = 2;
        while text.len() < 5000 {
            if line % 37 == 7 {
                text.push_str(if line % 2 == 0 { "\n" } else { "\r\n" });
            } else {
                text.push_str(&format!("{line}, x{line}\r\n"));
                want.push((line, format!("x{line}"), line.to_string()));
            }
            line += 1;
        }
        write(&dir, "t.csv", &text);
        check("t.csv", &want, &[40, 64, 1000, 4096, BLOCK]);
        // Then a quoted field holding a line break: the rest goes to one reader.
        text.push_str("\"q\nr\",y\n");
        want.push((line, "y".into(), "q\nr".into()));
        line += 2;
        text.push_str(&format!("{line},z\n"));
        want.push((line, "z".into(), line.to_string()));
        write(&dir, "q.csv", &text);
        check("q.csv", &want, &[64, 1000]);

        // An error names the line a sequential reader would.
        write(&dir, "short.csv", "a,b\r\n1,2\r\n\r\n3\r\n");
        let e = rows(64, &dir, "short.csv").unwrap_err().to_string();
        assert!(
            e.ends_with("short.csv:4: expected at least 2 fields, found 1"),
            "{e}"
        );
        write(&dir, "nohead.csv", "a,c\n1,2\n");
        let e = rows(64, &dir, "nohead.csv").unwrap_err().to_string();
        assert!(e.contains(":1: missing column `b`"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
