//! `kvlog._native`: the compiled twin of kvlog's Python hot paths.
//!
//! The Python engine is the reference: it owns every table (the probes' bytes and words, what a hit
//! means) and hands them over at construction, so that no list of words lives here. What this side owns
//! is only how fast the same answer is found; `tests/test_native_differential.py` holds it to the
//! Python one on every corpus log and on generated blocks.

mod passthrough;
mod probe;
mod validate;

use memchr::{memchr, memchr2, memchr3, memmem, memrchr};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// What a probe word found in a line makes of it (`kvlog.migration.candidates`: `_KEYWORD`, `_JSON`,
/// `_FIGURE`): a candidate at once, one if the line also names the JSON marker, one if it carries a
/// memory figure.
const KEYWORD: u8 = 0;
const JSON: u8 = 1;
const FIGURE: u8 = 2;

/// The words a byte can be part of, at one offset of the byte in them, and what finding one means.
struct Check {
    offset: usize,
    words: Vec<Vec<u8>>,
    finders: Vec<memmem::Finder<'static>>,
    kind: u8,
}

impl Check {
    /// Whether one of the words holds the probe byte found at `position` (the words end by `size`).
    fn starts_here(&self, data: &[u8], position: usize, size: usize) -> bool {
        position >= self.offset
            && self
                .words
                .iter()
                .any(|word| data[position - self.offset..size].starts_with(word))
    }
}

/// One probe byte and every check it is part of, keywords before figure words.
struct Scan {
    byte: u8,
    checks: Vec<Check>,
    figures_only: bool,
}

/// The line starts found so far in a block: few, so a sorted vector.
#[derive(Default)]
struct Starts(Vec<usize>);

impl Starts {
    fn contains(&self, start: usize) -> bool {
        self.0.binary_search(&start).is_ok()
    }

    fn insert(&mut self, start: usize) {
        if let Err(at) = self.0.binary_search(&start) {
            self.0.insert(at, start);
        }
    }
}

/// The byte-probe prefilter of `kvlog.migration.candidates`: the line starts of a block's candidates.
#[pyclass(module = "kvlog._native")]
struct Prefilter {
    scans: Vec<Scan>,
    json_event: memmem::Finder<'static>,
    figure_words: Vec<Vec<u8>>,
    probe_misses: usize,
}

#[pymethods]
impl Prefilter {
    /// `scans`: `((byte, ((offset, words, kind), ...)), ...)` as the Python prefilter merges its probes;
    /// `json_event`: what marks a JSON line as an event; `figure_words`: the words that with a digit make
    /// a memory figure (any case, standing alone); `probe_misses`: the finds of a byte that start no word
    /// after which its words are searched for instead.
    #[new]
    fn new(
        scans: Vec<(&[u8], Vec<(usize, Vec<&[u8]>, u8)>)>,
        json_event: &[u8],
        figure_words: Vec<&str>,
        probe_misses: usize,
    ) -> PyResult<Self> {
        let mut built = Vec::with_capacity(scans.len());
        for (byte, checks) in scans {
            let byte = match byte {
                &[byte] => byte,
                _ => return Err(PyValueError::new_err("a probe byte must be one byte")),
            };
            let mut built_checks = Vec::with_capacity(checks.len());
            for (offset, words, kind) in checks {
                if kind > FIGURE {
                    return Err(PyValueError::new_err(format!("unknown kind of probe word: {kind}")));
                }
                built_checks.push(Check {
                    offset,
                    words: words.iter().map(|word| word.to_vec()).collect(),
                    finders: words.iter().map(|word| memmem::Finder::new(word).into_owned()).collect(),
                    kind,
                });
            }
            let figures_only = built_checks.iter().all(|check| check.kind == FIGURE);
            built.push(Scan { byte, checks: built_checks, figures_only });
        }
        Ok(Prefilter {
            scans: built,
            json_event: memmem::Finder::new(json_event).into_owned(),
            figure_words: figure_words.iter().map(|word| word.as_bytes().to_ascii_lowercase()).collect(),
            probe_misses,
        })
    }

    /// The sorted starts of the candidate lines of `data[begin:size]` (whole lines), without the GIL.
    fn starts(&self, py: Python<'_>, data: &[u8], begin: usize, size: usize) -> PyResult<Vec<usize>> {
        if begin > size || size > data.len() {
            return Err(PyValueError::new_err("begin <= size <= len(data) is required"));
        }
        Ok(py.allow_threads(|| self.find(data, begin, size)))
    }
}

impl Prefilter {
    /// The scans in order, three probe bytes looked for in one pass first: in a block of request lines
    /// most probe bytes never occur, and one pass that finds none of three rules out three scans.
    fn find(&self, data: &[u8], begin: usize, size: usize) -> Vec<usize> {
        let mut starts = Starts::default();
        for group in self.scans.chunks(3) {
            let block = &data[begin..size];
            let first = match group {
                [one, two, three] => memchr3(one.byte, two.byte, three.byte, block),
                [one, two] => memchr2(one.byte, two.byte, block),
                _ => memchr(group[0].byte, block),
            };
            let from = match first {
                Some(at) => begin + at, // none of the group's bytes occurs before it
                None => continue,
            };
            for scan in group {
                if let Some(position) = find_byte(data, scan.byte, from, size) {
                    self.scan(data, size, scan, &mut starts, position);
                }
            }
        }
        starts.0
    }

    /// Each line a word of the scan's checks makes a candidate, from the byte's first find `position`:
    /// the byte while it is rare, the words themselves once it has started none `probe_misses` times.
    fn scan(&self, data: &[u8], size: usize, scan: &Scan, starts: &mut Starts, first: usize) {
        let mut position = Some(first);
        let mut misses = 0;
        let mut figure_checked = usize::MAX; // the line whose figure was looked for in vain
        while let Some(at) = position {
            if !starts.0.is_empty() && starts.contains(line_start(data, at)) {
                position = next_line(data, at, size).and_then(|end| find_byte(data, scan.byte, end, size));
                continue;
            }
            if !scan.checks.iter().any(|check| check.starts_here(data, at, size)) {
                misses += 1;
                if misses > self.probe_misses {
                    let start = line_start(data, at);
                    for check in &scan.checks {
                        self.search_words(data, size, start, check, starts);
                    }
                    return;
                }
                position = find_byte(data, scan.byte, at + 1, size);
                continue;
            }
            let start = line_start(data, at);
            let mut decided = false;
            for check in scan.checks.iter().filter(|check| check.starts_here(data, at, size)) {
                if check.kind != FIGURE {
                    if check.kind == KEYWORD || self.holds_json(data, start, size) {
                        starts.insert(start);
                    }
                    decided = true;
                    break;
                }
                if start != figure_checked {
                    if self.has_figure(line(data, start, size)) {
                        starts.insert(start);
                        decided = true;
                        break;
                    }
                    figure_checked = start;
                }
            }
            position = if !decided && !scan.figures_only {
                find_byte(data, scan.byte, at + 1, size) // the rest of the line may still hold a keyword
            } else {
                next_line(data, at, size).and_then(|end| find_byte(data, scan.byte, end, size))
            };
        }
    }

    /// The rest of a block where a probe byte is common: each line holding one of a check's words.
    fn search_words(&self, data: &[u8], size: usize, from: usize, check: &Check, starts: &mut Starts) {
        let find = |finder: &memmem::Finder<'_>, from: usize| finder.find(&data[from..size]).map(|at| from + at);
        let mut next: Vec<Option<usize>> = check.finders.iter().map(|finder| find(finder, from)).collect();
        while let Some(at) = next.iter().flatten().min().copied() {
            let start = line_start(data, at);
            if !starts.contains(start) && self.makes_candidate(data, start, size, check.kind) {
                starts.insert(start);
            }
            let end = match next_line(data, at, size) {
                Some(end) => end,
                None => return,
            };
            for (finder, found) in check.finders.iter().zip(next.iter_mut()) {
                if matches!(found, Some(at) if *at < end) {
                    *found = find(finder, end);
                }
            }
        }
    }

    fn makes_candidate(&self, data: &[u8], start: usize, size: usize, kind: u8) -> bool {
        match kind {
            KEYWORD => true,
            JSON => self.holds_json(data, start, size),
            _ => self.has_figure(line(data, start, size)),
        }
    }

    fn holds_json(&self, data: &[u8], start: usize, size: usize) -> bool {
        self.json_event.find(line(data, start, size)).is_some()
    }

    /// `carries_memory_figure` on bytes: a digit before a unit of bytes (`[0-9] ?(?:[KMGTP]i?B|kB)\b`),
    /// or a figure word standing alone (no ASCII letter on either side, any case) and a digit anywhere.
    fn has_figure(&self, line: &[u8]) -> bool {
        has_unit(line)
            || (line.iter().any(u8::is_ascii_digit)
                && line
                    .split(|byte| !byte.is_ascii_alphabetic())
                    .any(|run| self.figure_words.iter().any(|word| run.eq_ignore_ascii_case(word))))
    }
}

/// Whether a digit is followed, after one optional space, by `[KMGTP]B`, `[KMGTP]iB` or `kB` that no word
/// character (`[A-Za-z0-9_]`) follows.
fn has_unit(line: &[u8]) -> bool {
    let unit_at = |at: usize| -> bool {
        let end = match (line.get(at), line.get(at + 1), line.get(at + 2)) {
            (Some(b'K' | b'M' | b'G' | b'T' | b'P'), Some(b'B'), _) => at + 2,
            (Some(b'K' | b'M' | b'G' | b'T' | b'P'), Some(b'i'), Some(b'B')) => at + 3,
            (Some(b'k'), Some(b'B'), _) => at + 2,
            _ => return false,
        };
        !matches!(line.get(end), Some(byte) if byte.is_ascii_alphanumeric() || *byte == b'_')
    };
    line.iter().enumerate().any(|(at, byte)| {
        byte.is_ascii_digit() && (unit_at(at + 1) || (line.get(at + 1) == Some(&b' ') && unit_at(at + 2)))
    })
}

fn find_byte(data: &[u8], byte: u8, from: usize, size: usize) -> Option<usize> {
    memchr(byte, &data[from..size]).map(|at| from + at)
}

/// The start of the line that holds `position`.
fn line_start(data: &[u8], position: usize) -> usize {
    memrchr(b'\n', &data[..position]).map_or(0, |at| at + 1)
}

/// Where the line that holds `position` ends (its newline), if it ends before `size`.
fn next_line(data: &[u8], position: usize, size: usize) -> Option<usize> {
    memchr(b'\n', &data[position..size]).map(|at| position + at)
}

/// The line that starts at `start`, without its newline.
fn line(data: &[u8], start: usize, size: usize) -> &[u8] {
    let end = next_line(data, start, size).unwrap_or(size);
    &data[start..end]
}

#[pymodule]
fn _native(_py: Python<'_>, module: &PyModule) -> PyResult<()> {
    module.add_class::<Prefilter>()?;
    module.add_function(wrap_pyfunction!(passthrough::count_lines, module)?)?;
    module.add_class::<probe::Gate>()?;
    module.add_class::<validate::EventDecoders>()?;
    Ok(())
}
